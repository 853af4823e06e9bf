"""The OpenAPI pages, /docs (Swagger UI) and /redoc (ReDoc), with every script, style and icon
served by the daemon itself. FastAPI's own pages load them from cdn.jsdelivr.net and fonts from
Google: on an offline host the page stayed blank, and on a connected one each visit told a CDN
that someone was reading dcpm's API. The assets ship inside the fastapi-offline wheel; a
Content-Security-Policy keeps the browser from fetching anything from elsewhere."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
# ReDoc renders in a web worker built from a blob: URL; both pages draw icons from data: URLs.
SAME_ORIGIN_ONLY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'")


def assets_dir() -> Path:
    """swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png."""
    return Path(str(files("fastapi_offline") / "static"))


def add_docs_pages(app: FastAPI) -> None:
    """Add /docs and /redoc to an app created with docs_url=None and redoc_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    title = f"{app.title} {app.version}"
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        """The interactive reference: every route, its body and its answers, tried from the page."""
        page = get_swagger_ui_html(
            openapi_url=openapi_url, title=title, swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css", swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            # Swagger UI would otherwise send the schema to validator.swagger.io for its badge
            swagger_ui_parameters={"validatorUrl": None})
        return same_origin_only(page)

    @app.get("/redoc", response_class=HTMLResponse, include_in_schema=False)
    def redoc() -> HTMLResponse:
        """The same reference as one long read."""
        page = get_redoc_html(openapi_url=openapi_url, title=title, redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=f"{ASSETS_URL}/favicon.png", with_google_fonts=False)
        return same_origin_only(page)


def same_origin_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = SAME_ORIGIN_ONLY
    return page
