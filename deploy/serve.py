"""The container's entry point: replace this process with the Streamlit server (no shell in between), so the
server is PID 1 and receives the SIGTERM that `docker stop` and Kubernetes send. It listens on 0.0.0.0 and on the
port the host names in $PORT (Cloud Run, Render), 8501 when it names none. Run from the app's folder."""

import os
import sys


def server_command(env=os.environ) -> list[str]:
    """`streamlit run app.py` on 0.0.0.0 and $PORT; a $PORT that is not a port number stops with one sentence."""
    port = env.get("PORT", "8501")
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        sys.exit(f"PORT must be a TCP port number (1-65535), not {port!r}.")
    return [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", port]


if __name__ == "__main__":
    cmd = server_command()
    os.execv(cmd[0], cmd)
