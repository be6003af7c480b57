"""``patterncnn serve``: the HTTP service, also a Label Studio ML backend."""

from __future__ import annotations

import os
import sys

from .common import (
    add_classifier_args,
    add_max_length,
    classifier,
    given,
    model_name,
    port,
    positive_float,
    positive_int,
)


def register(sub) -> None:
    p = sub.add_parser("serve", help="HTTP service: classify maps or text; Label Studio ML backend",
                       description="Serve /v1/classify, /v1/analyze, /v1/labels, /v1/model, /health and the Label "
                                   "Studio ML backend protocol (/setup, /predict); the OpenAPI spec at /openapi.json. "
                                   "Binds to 127.0.0.1 by default. With --api-token or PATTERNCNN_API_TOKEN every "
                                   "path but /health and /webhook needs it; a non-loopback --host needs one.")
    p.add_argument("--host", type=given, default="127.0.0.1",
                   help="address to bind; a non-loopback one needs --api-token (default: %(default)s)")
    p.add_argument("--port", type=port, default=9090, help="port to listen on (default: %(default)s)")
    p.add_argument("--model", type=model_name, default="minilm", help="encoder for /v1/analyze (default: %(default)s)")
    p.add_argument("--no-encoder", action="store_true", help="serve maps only; do not load an encoder")
    add_max_length(p, "/v1/analyze refuses a longer input (422)")
    add_classifier_args(p)
    p.add_argument("--api-token", type=given, default=None,
                   help="require this bearer token (default: $PATTERNCNN_API_TOKEN, which other users of the machine "
                        "cannot read in the process list, as they can this option)")
    p.add_argument("--workers", type=positive_int, default=2,
                   help="decoding and inference calls at once (default: %(default)s)")
    p.add_argument("--max-t", type=positive_int, default=512, help="largest map side accepted (default: %(default)s)")
    p.add_argument("--max-batch", type=positive_int, default=1024, help="most maps per request (default: %(default)s)")
    p.add_argument("--max-body-mb", type=positive_int, default=256,
                   help="largest request body, in MiB; JSON bodies other than /predict's at most 16 MiB as well "
                        "(default: %(default)s)")
    p.add_argument("--max-inflight-mb", type=positive_int, default=1024,
                   help="most MiB of request bodies held at once, all requests together (at least --max-body-mb); "
                        "a body over it is refused, 503 with Retry-After (default: %(default)s)")
    p.add_argument("--cors-origin", type=given, action="append",
                   help="allow this browser origin (CORS is off by default)")
    p.add_argument("--shutdown-grace", type=positive_float, default=1.0,
                   help="seconds running requests get to finish on SIGTERM; the rest are answered 503 (those "
                        "still sending their body are disconnected) "
                        "(default: %(default)s)")
    p.set_defaults(func=run, own_signals=True)  # SIGTERM: a graceful stop (server.py), not main's Ctrl-C


def service_url(host: str, port: int) -> str:
    """The service's URL: an IPv6 literal in brackets (``http://[::1]:9090``)."""
    return f"http://[{host.strip('[]')}]:{port}" if ":" in host else f"http://{host}:{port}"


def run(args) -> int:
    from ..serve.settings import ServeSettings, is_loopback

    token = args.api_token or os.environ.get("PATTERNCNN_API_TOKEN") or None
    if not token and not is_loopback(args.host):
        raise ValueError(f"serving on {args.host} without an API token would let anyone who can reach it use it: "
                         f"pass --api-token (or set PATTERNCNN_API_TOKEN), or serve on 127.0.0.1")
    from ..serve.server import bind

    # Checked before anything slow is loaded: a token no header can carry, a taken port: one line, at once.
    settings = ServeSettings(api_token=token, max_t=args.max_t, max_batch=args.max_batch,
                             max_body_bytes=args.max_body_mb * 1024 * 1024,
                             max_inflight_bytes=args.max_inflight_mb * 1024 * 1024,
                             cors_origins=tuple(args.cors_origin or ()),
                             workers=args.workers, shutdown_grace=args.shutdown_grace, loopback_only=not token)
    if args.max_inflight_mb < args.max_body_mb:  # raised by ServeSettings: said, not silent (helper 97's walk)
        print(f"note: --max-inflight-mb {args.max_inflight_mb} is below --max-body-mb {args.max_body_mb}, so the "
              f"largest body could never be served; using {args.max_body_mb}", file=sys.stderr)
    sock = bind(args.host, args.port)
    import torch

    from ..encoders.load import load_encoder
    from ..serve import create_app
    from ..serve.server import run as serve_forever

    torch.set_num_threads(args.threads)  # bounded, like onnxruntime's
    enc = None if args.no_encoder else load_encoder(args.model, max_length=args.max_length)
    app = create_app(settings, classifier(args), enc)
    print(f"patterncnn serving on {service_url(args.host, args.port)} (spec: /openapi.json; token "
          f"{'required' if token else 'off'})", flush=True)
    args.abandons_threads = True  # after Ctrl-C, exit without waiting for inference the grace abandoned
    serve_forever(app, sock, settings)
    return 0
