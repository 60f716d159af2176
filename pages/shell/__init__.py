"""The app shell: the page registry, navigation and sidebar (entry.py), and the heap freeze after imports."""
