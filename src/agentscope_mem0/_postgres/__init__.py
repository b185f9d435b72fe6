"""PostgreSQL helpers shared by what keeps its rows beside a pgvector store:
mem0's history and the token totals."""
