"""The configuration a command runs with: where the memories are and how to embed.

Sources, strongest first: command-line options, the config file
(``--config`` or ``$AGENTSCOPE_MEM0_CONFIG``), environment variables, defaults.
The config file is a flat TOML or JSON object::

    backend = "pgvector"                      # embedded | pgvector | qdrant | hosted
    dsn_env = "AGENTSCOPE_MEM0_PG_DSN"        # or dsn = "postgresql://..."
    collection = "agentscope_mem0"
    embedding_model = "myapp.models:embedder" # default | hash[:dims] | module:attr
    chat_model = "env"                        # env | offline | module:attr
    outbox = "/var/lib/app/outbox"            # the middleware's Parameters(outbox=...)

Relative paths in the file are relative to the file's folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._exceptions import ConfigurationError
from .._postgres.connection import mask_url
from .._write.outbox import hosted_outbox_dir, outbox_dir_for_config
from ..backends import DEFAULT_COLLECTION

__all__ = [
    "BACKENDS",
    "CHAT_MODEL_ENV",
    "CONFIG_ENV",
    "EMBEDDER_ENV",
    "Settings",
    "load_settings",
    "mask_url",
    "store_outbox_dir",
]

CONFIG_ENV = "AGENTSCOPE_MEM0_CONFIG"
"""Environment variable naming the config file."""

EMBEDDER_ENV = "AGENTSCOPE_MEM0_EMBEDDER"
"""Environment variable choosing the embedding model (``default``, ``hash``, ``module:attr``)."""

CHAT_MODEL_ENV = "AGENTSCOPE_MEM0_CHAT_MODEL"
"""Environment variable choosing the extraction model (``env``, ``offline``, ``module:attr``)."""

BACKENDS = ("embedded", "pgvector", "qdrant", "hosted")

_COMMON_KEYS = {"backend", "folder", "embedding_model", "chat_model", "outbox"}
_BACKEND_KEYS = {
    "embedded": set(),
    "pgvector": {"dsn", "dsn_env", "collection", "history_db"},
    "qdrant": {"url", "host", "port", "https", "api_key_env", "collection", "history_db"},
    "hosted": {"url", "api_key_env"},
}
_DEFAULT_API_KEY_ENV = {"qdrant": "QDRANT_API_KEY", "hosted": "MEM0_API_KEY"}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a command needs to reach the memories."""

    backend: str = "embedded"
    """``embedded``, ``pgvector``, ``qdrant`` or ``hosted``."""
    folder: Path
    """The data folder: the embedded store and its write outbox."""
    config_file: Path | None = None
    """The config file read, if any."""
    collection: str = DEFAULT_COLLECTION
    """Table (pgvector) or collection (Qdrant server) name."""
    dsn: str | None = None
    """PostgreSQL connection string (pgvector)."""
    url: str | None = None
    """Qdrant server URL, or the hosted platform's base URL."""
    api_key_env: str | None = None
    """Environment variable holding the Qdrant or hosted-mem0 API key."""
    history_db: Path | None = None
    """mem0's history database (SQLite) for server backends; ``None``: the
    store's database for pgvector (with the token totals, every replica's),
    the data folder's ``history.db`` for a Qdrant server, as for the middleware."""
    embedding_model: str = "default"
    """Embedder spec: ``default``, ``hash[:dims]`` (tests) or ``module:attr``."""
    chat_model: str = "env"
    """Extraction model spec: ``env``, ``offline`` or ``module:attr``."""
    outbox: Path
    """Folder of the write outbox (``outbox.sqlite3``): ``outbox`` from the
    config file (the middleware's ``Parameters(outbox=...)``), else the folder
    the middleware uses for this store."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each setting came from: option, config file, environment or default."""

    @property
    def api_key(self) -> str | None:
        """The API key from the environment, if the backend takes one."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def server_fields(self, *, dims: int, history_db_path: str | None) -> dict[str, Any]:
        """The mem0 config fields of the pgvector or Qdrant server store named here.

        Args:
            dims: The vector size to declare.
            history_db_path: mem0's history database; ``None`` leaves it out.
        """
        from ..backends import pgvector_config, qdrant_server_config

        if self.backend == "pgvector":
            assert self.dsn is not None
            return pgvector_config(
                self.dsn, dims=dims, collection=self.collection, history_db_path=history_db_path
            )
        assert self.url is not None
        return qdrant_server_config(
            self.url,
            dims=dims,
            api_key=self.api_key,
            collection=self.collection,
            history_db_path=history_db_path,
        )

    def describe(self) -> dict[str, Any]:
        """The settings for display, secrets masked."""
        out: dict[str, Any] = {"backend": self.backend, "folder": str(self.folder)}
        if self.config_file is not None:
            out["config_file"] = str(self.config_file)
        if self.backend in ("pgvector", "qdrant"):
            out["collection"] = self.collection
        if self.dsn is not None:
            out["dsn"] = mask_url(self.dsn)
        if self.url is not None:
            out["url"] = mask_url(self.url)
        if self.api_key_env is not None:
            out["api_key"] = f"${self.api_key_env} ({'set' if self.api_key else 'not set'})"
        if self.history_db is not None:
            out["history_db"] = str(self.history_db)
        elif self.backend == "pgvector":
            out["history_db"] = "the store's database (tables agentscope_mem0_*)"
        out["embedding_model"] = self.embedding_model
        out["chat_model"] = self.chat_model
        out["outbox"] = str(self.outbox)
        return out


_MAX_CONFIG_BYTES = 1 << 20
"""A config is a few lines; reading stops after this (``--config /dev/zero`` never ends)."""


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as stream:
            raw = stream.read(_MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read the config file {path}: {exc}") from exc
    if len(raw) > _MAX_CONFIG_BYTES:
        raise ConfigurationError(
            f"the config file {path} is larger than 1 MiB; a config is a few lines of "
            "TOML or JSON: check the --config path (or $AGENTSCOPE_MEM0_CONFIG)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"the config file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"the config file {path} is not valid: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"the config file {path} must hold an object of settings")
    return data


def _check_keys(data: dict[str, Any], backend: str, path: Path) -> None:
    allowed = _COMMON_KEYS | _BACKEND_KEYS[backend]
    if "outbox_dir" in data:  # release 0.3's name
        raise ConfigurationError(
            f"'outbox_dir' in the config file {path} is now 'outbox', the name of the "
            "middleware's option: rename the key"
        )
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigurationError(
            f"the config file {path} has {', '.join(map(repr, unknown))}, which "
            f"backend {backend!r} does not use; allowed keys: {', '.join(sorted(allowed))}"
        )
    for key, value in data.items():
        expected: type | tuple[type, ...] = str
        if key == "port":
            expected = int
        elif key == "https":
            expected = bool
        if not isinstance(value, expected) or isinstance(value, bool) is not (expected is bool):
            raise ConfigurationError(
                f"{key!r} in the config file {path} must be a "
                f"{getattr(expected, '__name__', expected)}, got {value!r}"
            )


def load_settings(
    *,
    folder: str | os.PathLike[str] | None = None,
    config_path: str | os.PathLike[str] | None = None,
) -> Settings:
    """Resolve the settings from the options, the config file and the environment.

    Args:
        folder: ``--folder``, if given.
        config_path: ``--config``, if given (else ``$AGENTSCOPE_MEM0_CONFIG``).

    Raises:
        ConfigurationError: An unreadable or invalid config file.
    """
    sources: dict[str, str] = {}
    file_path: Path | None = None
    data: dict[str, Any] = {}
    chosen = config_path or os.environ.get(CONFIG_ENV)
    if chosen:
        file_path = Path(chosen).expanduser().resolve()
        data = _read_file(file_path)
        sources["config_file"] = "--config" if config_path else f"${CONFIG_ENV}"
    where = f"config file {file_path}" if file_path else ""

    backend = data.get("backend", "embedded")
    if backend not in BACKENDS:
        raise ConfigurationError(
            f"unknown backend {backend!r} in {where}; use one of {', '.join(BACKENDS)}"
        )
    sources["backend"] = where if "backend" in data else "default"
    if file_path is not None:
        _check_keys(data, backend, file_path)
    base = file_path.parent if file_path is not None else Path.cwd()

    def path_of(value: str) -> Path:
        return (base / Path(value).expanduser()).resolve()

    # Here, not at the top: importing the embedded store's package imports mem0,
    # and a command's --help should not wait for that.
    from ..local import DATA_DIR_ENV

    if folder:
        folder_path, sources["folder"] = Path(folder).expanduser().resolve(), "--folder"
    elif "folder" in data:
        folder_path, sources["folder"] = path_of(data["folder"]), where
    elif os.environ.get(DATA_DIR_ENV):
        folder_path = Path(os.environ[DATA_DIR_ENV]).expanduser().resolve()
        sources["folder"] = f"${DATA_DIR_ENV}"
    else:
        folder_path, sources["folder"] = Path.home() / ".agentscope-mem0", "default"

    def pick(key: str, env: str, default: str) -> str:
        if key in data:
            sources[key] = where
            return str(data[key])
        if os.environ.get(env):
            sources[key] = f"${env}"
            return os.environ[env]
        sources[key] = "default"
        return default

    embedding = pick("embedding_model", EMBEDDER_ENV, "default")
    chat = pick("chat_model", CHAT_MODEL_ENV, "env")
    outbox = path_of(data["outbox"]) if "outbox" in data else folder_path
    sources["outbox"] = where if "outbox" in data else "next to the store"

    dsn = data.get("dsn")
    if "dsn_env" in data:
        if dsn is not None:
            raise ConfigurationError(f"give either 'dsn' or 'dsn_env' in {where}, not both")
        dsn = os.environ.get(data["dsn_env"])
        if not dsn:
            raise ConfigurationError(
                f"{where} reads the PostgreSQL DSN from ${data['dsn_env']}, which is not set"
            )
    if backend == "pgvector" and not dsn:
        raise ConfigurationError(
            f"backend 'pgvector' needs 'dsn' (or 'dsn_env') in {where}, e.g. "
            "dsn = 'postgresql://user:password@localhost:5432/db'"
        )

    url = data.get("url")
    if backend == "qdrant":
        if url is None:
            if "host" not in data:
                raise ConfigurationError(
                    f"backend 'qdrant' needs 'url' (or 'host' and 'port') in {where}, e.g. "
                    "url = 'http://localhost:6333'"
                )
            scheme = "https" if data.get("https") else "http"
            url = f"{scheme}://{data['host']}:{data.get('port', 6333)}"
        elif "host" in data or "port" in data:
            raise ConfigurationError(f"give either 'url' or 'host'/'port' in {where}, not both")

    api_key_env = data.get("api_key_env") or _DEFAULT_API_KEY_ENV.get(backend)
    settings = Settings(
        backend=backend,
        folder=folder_path,
        config_file=file_path,
        collection=data.get("collection", DEFAULT_COLLECTION),
        dsn=dsn,
        url=url,
        api_key_env=api_key_env,
        history_db=path_of(data["history_db"]) if "history_db" in data else None,
        embedding_model=embedding,
        chat_model=chat,
        outbox=outbox,
        sources=sources,
    )
    if "outbox" in data:
        return settings
    # The folder the middleware picks for this store (one rule for both).
    return replace(settings, outbox=store_outbox_dir(settings))


# The vector size does not name a store (see _write.outbox); the config
# builders only need a valid one.
_ANY_DIMS = 8


def store_outbox_dir(settings: Settings) -> Path:
    """The outbox folder of the store ``settings`` name.

    Args:
        settings: The command's settings; their ``outbox`` is ignored here.

    Returns:
        The data folder for the embedded store; for a server store, the folder
        :func:`~agentscope_mem0._write.outbox.outbox_dir_for_config` gives its
        mem0 config; for the hosted platform, the one of its host and API key.

    Raises:
        ConfigurationError: The server settings do not make a mem0 config.
    """
    if settings.backend == "embedded":
        return settings.folder
    if settings.backend == "hosted":
        key = settings.api_key or ""
        return hosted_outbox_dir(settings.url, hashlib.md5(key.encode()).hexdigest())
    from .._mem0.clients import build_mem0_config
    from ..local import history_db_path

    history = str(settings.history_db) if settings.history_db else str(history_db_path())
    fields = settings.server_fields(dims=_ANY_DIMS, history_db_path=history)
    try:
        config = build_mem0_config(mem0_config=fields)
    except ValueError as exc:
        raise ConfigurationError(f"the {settings.backend} settings are not valid: {exc}") from exc
    place = outbox_dir_for_config(config)
    return place if place is not None else settings.folder
