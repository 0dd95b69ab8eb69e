"""The explorer's web layer: ``create_app(store)`` builds the FastAPI app (pages, API, files).

FastAPI is imported only when an app is created, so importing this package stays light.
"""

from repogym.explorer.web.app import create_app

__all__ = ["create_app"]
