"""LLM layer: architectures, the built-in catalog of Hugging Face config.json files, the loader."""
