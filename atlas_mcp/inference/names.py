"""The embedding models by their setting names (``[embedding] model``), without loading any:
the settings list these, and ``embedder.open_embedder`` opens them."""

PER_LANGUAGE = "per-language"  # MiniLM for English memories, multilingual-e5-small for the rest
EMBEDDING_MODELS = (PER_LANGUAGE, "minilm-l6-int8", "multilingual-e5-small")
