"""A tiny Django site that uses sqlq (tests/test_django.py runs it for real).

Environment:
    DJANGO_DATABASE_URL: the site's database, ``postgresql://...`` or a SQLite file
        path (default: db.sqlite3 beside this project).
    SHOP_SQLQ_DB: a separate queue database (file or URL). Unset: the queue shares the
        site's database, and a put joins the request's transaction. (Not ``SQLQ_DB``,
        which a shell may export for the ``sqlq`` command: the site would then quietly
        use that queue.)
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "site_config.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "sqlq.contrib.django",
    "shop",
]


def _database(url: str) -> dict[str, object]:
    if not url.startswith(("postgresql://", "postgres://")):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url}
    parts = urlsplit(url)
    return {"ENGINE": "django.db.backends.postgresql", "NAME": parts.path.lstrip("/"),
            "USER": unquote(parts.username or ""), "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "", "PORT": str(parts.port or "")}


DATABASES = {"default": _database(os.environ.get("DJANGO_DATABASE_URL")
                                  or str(BASE_DIR / "db.sqlite3"))}

# The whole configuration of sqlq: share Django's database, or use a queue of its own.
SQLQ = ({"DB": os.environ["SHOP_SQLQ_DB"]} if os.environ.get("SHOP_SQLQ_DB")
        else {"DATABASE": "default"})
