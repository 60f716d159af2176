# PyTorch Whiteboard for hosts that run containers (Hugging Face Spaces, Cloud Run, a VM): CPU-only torch,
# a non-root user, the app on 0.0.0.0 and the port the host names in $PORT (8501 when it names none).
FROM python:3.11-slim

# System packages (one apt-get layer) for exporting figures as images go here:
# RUN apt-get update && apt-get install -y --no-install-recommends <packages> && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=8501

RUN useradd --create-home --uid 1000 app
WORKDIR /home/app/whiteboard

# torch first, from PyTorch's CPU wheel index (PyPI's Linux wheel pulls in the CUDA libraries): the version is
# the one requirements.txt pins, which the second install then finds already satisfied.
COPY requirements.txt .
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu \
        "torch==$(sed -n 's/^torch==//p' requirements.txt)" \
    && pip install --no-cache-dir -r requirements.txt

COPY --chown=1000:1000 . .
USER 1000

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['PORT'] + '/_stcore/health', timeout=4)"]

CMD ["sh", "-c", "streamlit run app.py --server.address 0.0.0.0 --server.port ${PORT:-8501}"]
