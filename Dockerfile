# atlas-mcp over streamable HTTP, embedded engine. Mount a config with [users.*] tokens:
#   docker build -t atlas-mcp .
#   docker run -p 8765:8765 -v atlas-data:/data -v $PWD/config/atlas.toml:/etc/atlas/atlas.toml:ro atlas-mcp
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    ATLAS_DATA_DIR=/data ATLAS_CONFIG=/etc/atlas/atlas.toml \
    ATLAS_TRANSPORT=http ATLAS_HOST=0.0.0.0 ATLAS_PORT=8765

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY atlas_mcp ./atlas_mcp
RUN pip install ".[elasticsearch,encryption]" && useradd --system --create-home atlas \
    && mkdir -p /data /etc/atlas && chown atlas /data

USER atlas
# Derive MiniLM's integer-product model (~4 s) and build e5's graph (~1.5 s) now, cached in the
# atlas user's cache, not on the container's first recall.
RUN python -c "from atlas_mcp.inference.embedder import default_models as m; c = m(); [c.embedder(i).embed_batch(['warm']) for i in c.members]"
VOLUME ["/data"]
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8765/healthz').status != 200)"
CMD ["atlas-mcp", "serve", "--transport", "http"]
