"""Watching a page in Chromium for what must never happen: a Content-Security-
Policy violation, a console refusal, a page error, and (when asked) any console
error.

A listener installed before any page script records each
``securitypolicyviolation`` (once a document, however many watches a kept
page has had); Chromium's console "Refused to …" lines and page
errors (htmx without eval would throw) are collected too.
"""

from __future__ import annotations

import re

WATCH = """
if (!window.__csp) {
  window.__csp = [];
  document.addEventListener("securitypolicyviolation", function (event) {
    window.__csp.push(
      event.violatedDirective + " blocked " + (event.blockedURI || "inline") +
      " at " + event.sourceFile + ":" + event.lineNumber
    );
  }, true);
}
"""
# The violations reported so far, once htmx has no request on its way and no
# swap settling (its settle sets the new content's attributes 20 ms after the
# swap), or after a second at most. Chromium dispatches each report as a task
# of its own, queued when the violation happens: the timer's task queued after
# them runs once they have, so none queued before the answer is missed.
REPORTED = """() => new Promise(done => {
  const busy = ".htmx-request, .htmx-swapping, .htmx-settling";
  const until = performance.now() + 1000;
  const ask = () => document.querySelector(busy) && performance.now() < until
    ? setTimeout(ask, 10)
    : setTimeout(() => done(window.__csp));
  ask();
})"""
# Chromium logs a failed request as a console error; a form refused with 400,
# 409 or 422 is an answer the page shows in place, not a fault.
REFUSED_FORM = re.compile(r"Failed to load resource: .*status of (400|409|422)\b")


class Watch:
    """The violations, console refusals and page errors of one page."""

    def __init__(self, page, *, console_errors: bool = False):
        """``console_errors``: any console error counts too, but a form's
        refusal answered as designed (400, 409, 422, swapped in place)."""
        self.page = page
        self.console_errors = console_errors
        self.console: list[str] = []
        self.errors: list[str] = []
        # A kept page (tests/browser/conftest.py) is watched by each test
        # that takes it: its script is added once.
        if not getattr(page, "watched", False):
            page.add_init_script(WATCH)
            page.watched = True
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _console(self, message) -> None:
        text = message.text
        if (
            "Refused to" in text
            or "Content Security Policy" in text
            or (
                self.console_errors
                and message.type == "error"
                and not REFUSED_FORM.search(text)
            )
        ):
            self.console.append(text)

    def found(self) -> list[str]:
        reported = self.page.evaluate(REPORTED)
        assert reported is not None, "the violation listener is not installed"
        return reported + self.console + self.errors

    def check(self, where: str) -> None:
        assert self.found() == [], where

    def goto(self, path: str) -> None:
        response = self.page.goto(path)
        assert response.status == 200, path
        assert "content-security-policy" in response.headers, path
        self.check(path)

    def poll(self, fragment: str) -> None:
        """One htmx poll whose URL contains ``fragment``, and its swap. The
        page's clock (``page.clock.install()`` before the page loads) is run on
        to the poll, every 2 s at the slowest, rather than waited for."""
        with self.page.expect_response(
            lambda r: fragment in r.url and r.request.headers.get("hx-request"),
            timeout=5_000,
        ):
            self.page.clock.run_for(2_000)
        self.check(f"after polling {fragment}")
