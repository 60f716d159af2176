"""Page scripts, one per topic, named by their URL slug; shared code in the subpackages below.

Why this folder is built this way (Streamlit 1.67):

- Every page script sits directly in `pages/` and its file name is its URL slug (`pages/data-loading.py` is
  `/data-loading`). A top-level `pages/` folder puts a fresh server in Streamlit's v1 multipage mode until some
  session has called `st.navigation`: then the first request, if it is a deep link, runs the page file whose
  name matches the URL directly, outside `app.py`. A name that does not match would answer "page not found".
- So each page script starts with `require_shell()` (pages/shell/entry.py): when it runs outside the app
  shell it runs the shell itself (`main()`: page config, the navigation, the sidebar) and stops. The shell
  switches the server to `st.navigation`, finds the requested page by its slug and runs it once more, inside.
- Only page scripts sit at the top of `pages/`: v1 lists every `pages/*.py` as a page, so shared code lives in
  subpackages (`pages/shell/`, `pages/ui/`) that its scan cannot list and no URL can reach.
"""
