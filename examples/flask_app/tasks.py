"""The app's tasks: declared at import, before the app exists, run by ``flask sqlq work``."""

from __future__ import annotations

from .extensions import Word, db, jobs


@jobs.task(tube="words", retries=2)
def count_letters(word_id: int) -> int:
    """Runs in a worker, in an app context of its own: db.session is the app's."""
    word = db.session.get(Word, word_id)
    if word is None:
        raise LookupError(f"no word {word_id}")
    word.letters = sum(c.isalpha() for c in word.text)
    db.session.commit()
    return word.letters
