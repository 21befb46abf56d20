"""A tiny Flask + Flask-SQLAlchemy app whose requests enqueue sqlq tasks.

Run from ``examples/`` (the directory that holds ``flask_app/``), in a venv with
``pip install '/path/to/sqlq[flask]'``:

    export FLASK_SQLALCHEMY_DATABASE_URI=sqlite:///$PWD/words.db   # the queue shares it
    # export FLASK_SQLQ_DB=$PWD/jobs.db                            # or a queue of its own
    flask --app flask_app sqlq work &        # runs count_letters (tasks.py)
    flask --app flask_app run
    curl -X POST localhost:5000/words/hello  # {"id": 1, "job": 1}
    curl localhost:5000/words/1              # {"letters": 5, "text": "hello"}
    curl -X POST localhost:5000/words/oops/fail   # 500: no word, no job

With the queue in the app's database, the job is written in the request's own
transaction: it exists only if ``db.session.commit()`` ran. With a queue of its
own it is put when that commit happens. Either way a request that fails after
enqueueing leaves neither the row nor the job.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort

from .extensions import Word, db, jobs
from .tasks import count_letters


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///words.db"
    app.config.from_prefixed_env()  # FLASK_SQLALCHEMY_DATABASE_URI, FLASK_SQLQ_DB
    db.init_app(app)
    jobs.init_app(app)
    with app.app_context():
        db.create_all()

    @app.post("/words/<text>")
    def add_word(text: str) -> tuple[dict[str, Any], int]:
        word = Word(text=text)
        db.session.add(word)
        db.session.flush()                    # the row's id, for the task
        job = count_letters.put(word.id)      # joins this transaction (None: after commit)
        db.session.commit()
        return {"id": word.id, "job": job}, 201

    @app.get("/words/<int:word_id>")
    def show_word(word_id: int) -> dict[str, Any]:
        word = db.session.get(Word, word_id) or abort(404)
        return {"text": word.text, "letters": word.letters}

    @app.post("/words/<text>/fail")
    def add_word_then_fail(text: str) -> None:
        word = Word(text=text)
        db.session.add(word)
        db.session.flush()
        count_letters.put(word.id)
        raise RuntimeError("failed after enqueueing: the row and the job are rolled back")

    return app
