"""The user's profile: a short, dated summary of their current memories.

:mod:`.record` keeps it (a record of the working-memory store) and renders its
block; :mod:`.distil` asks the model for it and checks the answer against the
memories; :mod:`.refresher` runs that in the background after enough new
writes or a supersede. Nothing here runs on the reply path but reading the
record.
"""
