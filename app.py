"""PyTorch Whiteboard: the entry point. Run with `streamlit run app.py`."""

from pages.shell.entry import main

main()
