"""Stage 5, text in and out: tokenizer and detokenizer graphs (the portable one in standard ops
over UTF-8 bytes, or onnxruntime-extensions' SentencePiece op) and each tokenizer family's rules."""
