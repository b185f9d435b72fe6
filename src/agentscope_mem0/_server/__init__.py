"""A Qdrant server with the embedded default's search: the mem0 provider and the copy.

:mod:`.qdrant_config` names the provider and registers it with mem0,
:mod:`.qdrant_store` is the provider (mem0's own Qdrant store with the same
keyword vectors and the same fused query as the embedded store, kept in step
with the encoder), and :mod:`.copy` copies an embedded folder into a server collection
(``agentscope-mem0 migrate --to URL``).
"""
