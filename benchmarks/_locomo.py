"""LoCoMo for the recall benchmarks: conversations, questions, cached embeddings.

The data is read in place (``../shared/data/locomo/``), never copied. The
offline e5 model is the embedded default's; its vectors for every turn and
question are kept on disk outside the repository
(``~/.cache/agentscope-mem0-bench``, or ``$AGENTSCOPE_MEM0_BENCH_CACHE``), so
that a sweep of search settings never embeds a text twice. The cache is keyed
by the model name, the kind (query or passage) and the exact text; e5 gives
the same vector for a text alone or in a batch, so a cached vector is the
vector mem0 would have got.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentscope_mem0.local import OfflineE5Embedding

__all__ = ["CachedE5Embedding", "cache_dir", "load_conversations"]

logger = logging.getLogger(__name__)

CACHE_ENV = "AGENTSCOPE_MEM0_BENCH_CACHE"


def cache_dir() -> Path:
    """Where benchmark caches live (created on first use)."""
    path = Path(
        os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "agentscope-mem0-bench"
    ).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_conversations(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo file (or a folder holding ``locomo_dev.json``).

    Each: ``id``, ``turns`` (``dia_id``, ``text`` as ``"<speaker>: <text>"``,
    the session ``date``) and ``questions`` (``question``, ``category``, the
    ``evidence`` turn ids present in the conversation; questions without any
    are left out).
    """
    file = path / "locomo_dev.json" if path.is_dir() else path
    samples = json.loads(file.read_text(encoding="utf-8"))
    conversations = []
    for sample in samples[:limit] if limit else samples:
        conv = sample["conversation"]
        turns = []
        sessions = sorted(
            (k for k, v in conv.items() if k.startswith("session_") and isinstance(v, list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            for turn in conv[key]:
                turns.append(
                    {
                        "dia_id": turn["dia_id"],
                        "text": f"{turn['speaker']}: {turn['text']}",
                        "date": conv.get(f"{key}_date_time", ""),
                    }
                )
        known = {t["dia_id"] for t in turns}
        questions = [
            {
                "question": qa["question"],
                "category": int(qa["category"]),
                "evidence": sorted(set(qa["evidence"]) & known),
            }
            for qa in sample["qa"]
            if set(qa.get("evidence") or ()) & known
        ]
        conversations.append({"id": sample["sample_id"], "turns": turns, "questions": questions})
    return conversations


def _key(query: bool, text: str) -> str:
    return hashlib.sha256(f"{'q' if query else 'p'}\0{text}".encode()).hexdigest()


class CachedE5Embedding(OfflineE5Embedding):
    """The offline e5 model with every vector it makes kept on disk.

    A drop-in for :class:`OfflineE5Embedding` (mem0 reaches it through the
    package's adapter as usual); texts already embedded are looked up.
    """

    def __init__(self, file: Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.file = file or cache_dir() / f"{self.model}.npz"
        self._lock = threading.Lock()
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self.hits = 0
        self.misses = 0
        if self.file.is_file():
            with np.load(self.file) as data:
                self._vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
            logger.info("%d cached vectors in %s", len(self._vectors), self.file)

    def embed_sync(
        self, texts: Sequence[str], *, query: bool = False, **kwargs: Any
    ) -> list[list[float]]:
        """:meth:`OfflineE5Embedding.embed_sync`, looking up the texts already embedded.

        Every other keyword (``background``, ``may_refuse``, any added later)
        goes to the real method untouched, so the cache cannot fall behind it.
        """
        keys = [_key(query, str(t)) for t in texts]
        with self._lock:
            missing = sorted({i for i, k in enumerate(keys) if k not in self._vectors})
        if missing:
            made = super().embed_sync([texts[i] for i in missing], query=query, **kwargs)
            with self._lock:
                for i, vector in zip(missing, made, strict=True):
                    self._vectors[keys[i]] = np.asarray(vector, dtype=np.float32)
                self._dirty = True
        with self._lock:
            self.misses += len(missing)
            self.hits += len(keys) - len(missing)
            return [self._vectors[k].tolist() for k in keys]

    def prepare(self, texts: Sequence[str], *, query: bool, batch: int = 64) -> None:
        """Embed (in batches) whichever of ``texts`` is not cached yet, then save."""
        todo = [t for t in dict.fromkeys(texts) if _key(query, t) not in self._vectors]
        for start in range(0, len(todo), batch):
            self.embed_sync(todo[start : start + batch], query=query)
            if start // batch % 10 == 9:
                self.save()
                logger.info("embedded %d of %d", start + batch, len(todo))
        self.save()

    def save(self) -> None:
        """Write the cache file (atomically) if anything was added."""
        with self._lock:
            if not self._dirty:
                return
            keys = np.array(list(self._vectors))
            vectors = np.stack(list(self._vectors.values()))
            self._dirty = False
        temp = self.file.with_suffix(".tmp.npz")
        np.savez(temp, keys=keys, vectors=vectors)
        os.replace(temp, self.file)
