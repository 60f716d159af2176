"""Predict-then-run questions about attention and transformers, each kept beside the demo it belongs to."""

from demos.transformers import (
    attention,
    block,
    embeddings,
    multihead,
    norms,
    positions,
    scratch,
    sequences,
    tiny_model,
)

QUESTIONS = (*attention.QUESTIONS, *multihead.QUESTIONS, *positions.QUESTIONS, *norms.QUESTIONS, *block.QUESTIONS,
             *embeddings.QUESTIONS, *sequences.QUESTIONS, *tiny_model.QUESTIONS, *scratch.QUESTIONS)
