"""Drive the real app: start a Streamlit server and a headless Chromium (harness/browser.py).

Shared by the browser tests and the benchmark; it sits beside them, so neither imports the other.
"""
