"""The app's extensions and its one model, created before any app exists."""

from __future__ import annotations

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Mapped, mapped_column

from sqlq.contrib.flask import Sqlq

db = SQLAlchemy()
jobs = Sqlq()


class Word(db.Model):  # type: ignore[name-defined,misc]
    id: Mapped[int] = mapped_column(primary_key=True)
    text: Mapped[str]
    letters: Mapped[int | None]  # filled in by the count_letters task
