# PyTorch Whiteboard for hosts that run containers (Cloud Run, a VM, Kubernetes, a paid Hugging Face Space):
# CPU-only torch, g++ for the inductor demo, code owned by root and read-only to the non-root user the app runs as,
# streamlit as PID 1 on 0.0.0.0 and the port the host names in $PORT (8501 when it names none).
# python:3.11-slim pinned by its image-index digest, as docker-library/repo-info records it (built 2026-08-05:
# Debian 13 "trixie", Python 3.11.15): a rebuild gets the same base until this line is changed on purpose.
FROM python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff

# torch.compile's inductor backend compiles its CPU kernels with g++ (without one: InvalidCxxCompiler); the
# version is trixie's g++ metapackage (gcc 14), pinned so a rebuild fails loudly rather than changes compiler.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++=4:14.2.0-1 \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=8501

RUN useradd --create-home --uid 1000 app
WORKDIR /app

# torch first, from PyTorch's CPU wheel index only (PyPI's Linux wheel pulls in the CUDA libraries): this step
# fails rather than falls back to the CUDA build; requirements.txt then finds the pin already satisfied.
COPY requirements.txt .
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu \
        "torch==$(sed -n 's/^torch==//p' requirements.txt)" \
    && pip install --no-cache-dir -r requirements.txt

# The code stays root's: the app's user can read it, not change it (.dockerignore keeps tests, the benchmark,
# CI and the README screenshots out).
COPY . .
RUN chmod -R go-w /app
USER 1000

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['PORT'] + '/_stcore/health', timeout=4)"]

# Exec form, no shell: streamlit is PID 1 and gets the SIGTERM that `docker stop` and Kubernetes send.
ENTRYPOINT ["python", "deploy/serve.py"]
