"""``patterncnn serve``: the HTTP service, also a Label Studio ML backend."""

from __future__ import annotations

import logging
import os

from .common import add_classifier_args, classifier

log = logging.getLogger("patterncnn")


def register(sub) -> None:
    p = sub.add_parser("serve", help="HTTP service: classify maps or text; Label Studio ML backend",
                       description="Serve /v1/classify, /v1/analyze, /v1/labels, /v1/model, /health and the Label "
                                   "Studio ML backend protocol (/setup, /predict). Binds to 127.0.0.1 by default. With "
                                   "--api-token or PATTERNCNN_API_TOKEN every endpoint but /health needs it.")
    p.add_argument("--host", default="127.0.0.1", help="(default: %(default)s)")
    p.add_argument("--port", type=int, default=9090, help="(default: %(default)s)")
    p.add_argument("--model", default="minilm", help="encoder for /v1/analyze (default: %(default)s)")
    p.add_argument("--no-encoder", action="store_true", help="serve maps only; do not load an encoder")
    p.add_argument("--max-length", type=int, default=128, help="(default: %(default)s)")
    add_classifier_args(p)
    p.add_argument("--api-token", default=None, help="require this bearer token (default: $PATTERNCNN_API_TOKEN)")
    p.add_argument("--workers", type=int, default=2, help="inference calls at once (default: %(default)s)")
    p.add_argument("--max-t", type=int, default=512, help="largest map side accepted (default: %(default)s)")
    p.add_argument("--max-batch", type=int, default=1024, help="most maps per request (default: %(default)s)")
    p.add_argument("--max-body-mb", type=int, default=256, help="largest request body (default: %(default)s)")
    p.add_argument("--cors-origin", action="append", help="allow this browser origin (CORS is off by default)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch
    import uvicorn

    from ..encoder import load_encoder
    from ..serve import ServeSettings, create_app

    token = args.api_token or os.environ.get("PATTERNCNN_API_TOKEN") or None
    if args.host not in ("127.0.0.1", "localhost", "::1") and not token:
        log.warning("serving on %s without an API token: anyone who can reach it can use it", args.host)
    torch.set_num_threads(args.threads)  # bounded, like onnxruntime's
    settings = ServeSettings(api_token=token, max_t=args.max_t, max_batch=args.max_batch,
                             max_body_bytes=args.max_body_mb * 1024 * 1024, cors_origins=tuple(args.cors_origin or ()),
                             workers=args.workers)
    enc = None if args.no_encoder else load_encoder(args.model, max_length=args.max_length)
    app = create_app(settings, classifier(args), enc)
    print(f"patterncnn serving on http://{args.host}:{args.port} (docs: /docs; token {'required' if token else 'off'})")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
