"""Embedder service: texts to vectors with the bundled offline model (fastembed on ONNX)."""
