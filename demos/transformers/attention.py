"""(placeholder: filled in by the attention view)"""

QUESTIONS = ()  # this view's predict-then-run questions (demos.quiz.Question), gathered by questions.py
