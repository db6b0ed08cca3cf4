"""The Elasticsearch engine: DLS-scoped recall with RRF, rerank and decay in one query.

Pure request-body builders (``layout``, ``mappings``, ``documents``, ``requests``, ``keys``)
are kept apart from the code that talks to a cluster (``transport``, ``engine``, ``admin``,
``doctor``), so every body the engine sends can be printed, golden-tested and validated
against the Elasticsearch specification without a server.
"""
