"""(placeholder: filled in by the embeddings view)"""

QUESTIONS = ()  # this view's predict-then-run questions (demos.quiz.Question), gathered by questions.py
