"""Two users talk to the service over HTTP; each one's second session remembers
the first, and neither sees the other's memories.

    uvicorn demos.service_app:app --port 8000   # in another terminal
    python demos/service_client.py --url http://127.0.0.1:8000

Per user, as ``agentscope.app`` expects (the user is the ``X-User-ID`` header):
create a credential (the app's keyless ``offline_scripted`` one, or DashScope's
when ``DASHSCOPE_API_KEY`` is set here), an agent, then a session per
conversation; send a message with ``POST /chat/`` and read the reply from
``GET /sessions/{id}/messages``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from typing import Any

import httpx

USERS = {
    "alice": ("I live in Hangzhou. I like green tea.", ("Hangzhou", "green tea")),
    "bob": ("I live in Berlin. I like black coffee.", ("Berlin", "black coffee")),
}
QUESTION = "Where do I live, and what do I like to drink?"


class User:
    """One user of the service; every request carries their ``X-User-ID``."""

    def __init__(self, http: httpx.Client, user_id: str) -> None:
        self.http = http
        self.user_id = user_id
        self.headers = {"X-User-ID": user_id}
        self.agent_id = ""
        self.model_config: dict[str, Any] = {}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(path, json=body, headers=self.headers)
        response.raise_for_status()
        return response.json()

    def setup(self) -> None:
        """A credential and an agent for this user."""
        key = os.environ.get("DASHSCOPE_API_KEY")
        if key:
            data: dict[str, Any] = {"type": "dashscope_credential", "api_key": key}
            model = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
        else:
            data, model = {"type": "offline_scripted"}, "scripted"
        credential = self.post("/credential/", {"data": data})["credential_id"]
        self.model_config = {
            "type": data["type"],
            "credential_id": credential,
            "model": model,
            "parameters": {},
        }
        self.agent_id = self.post("/agent/", {"name": "assistant"})["agent_id"]

    def new_session(self, name: str) -> str:
        body = {"agent_id": self.agent_id, "name": name, "chat_model_config": self.model_config}
        return self.post("/sessions/", body)["session_id"]

    def chat(self, session_id: str, text: str, *, timeout: float = 120.0) -> str:
        """Send ``text`` and wait for the agent's reply."""
        message_id = str(uuid.uuid4())
        message = {
            "id": message_id,
            "name": self.user_id,
            "role": "user",
            "content": [{"type": "text", "text": text}],
        }
        self.post("/chat/", {"agent_id": self.agent_id, "session_id": session_id, "input": message})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.1)
            page = self.http.get(
                f"/sessions/{session_id}/messages",
                params={"agent_id": self.agent_id},
                headers=self.headers,
            ).json()
            ids = [m["id"] for m in page["messages"]]
            if not page["is_running"] and message_id in ids:
                replies = [
                    m
                    for m in page["messages"][ids.index(message_id) + 1 :]
                    if m["role"] == "assistant"
                ]
                if replies:
                    return _text(replies[-1])
        raise TimeoutError(f"no reply for {self.user_id} in session {session_id}")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def main() -> int:
    """Run both users' two sessions; exit 1 if memory or isolation fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service's base URL")
    args = parser.parse_args()
    ok = True
    with httpx.Client(base_url=args.url, timeout=30) as http:
        users = {name: User(http, name) for name in USERS}
        for user in users.values():
            user.setup()
        for name, user in users.items():
            told = USERS[name][0]
            print(f"[{name}, session 1] {told}\n  -> {user.chat(user.new_session('first'), told)}")
        # Writes are stored in the background; wait for them (demo endpoint).
        http.post("/memory/flush").raise_for_status()
        for name, user in users.items():
            reply = user.chat(user.new_session("second"), QUESTION)
            print(f"[{name}, session 2] {QUESTION}\n  -> {reply}")
            (other,) = set(USERS) - {name}
            remembers = all(word in reply for word in USERS[name][1])
            leaks = any(word in reply for word in USERS[other][1])
            ok = ok and remembers and not leaks
            print(f"  remembers own facts: {remembers}; sees {other}'s: {leaks}")
    print("OK: each user's second session remembers, and only their own" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
