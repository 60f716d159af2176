"""Practice: question generators (gen_*.py, one Family each), the catalog of every question by id, and drills.

family.py   what a generator is, and how its choices are built from wrong rules
gen_*.py    the families, grouped by the page that teaches them
catalog.py  every question by id: the interview corners' banks and the generated ones
drill.py    a drill's questions, answers, times, spaced repetition, mastery and report
"""
