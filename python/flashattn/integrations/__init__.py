"""Integrations of flashattn into other libraries (transformers.py: Hugging Face transformers)."""
