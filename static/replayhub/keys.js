// Keyboard shortcuts for the review pages. Every key maps to a link or a form
// that works without this file; the keys only move focus and submit.
(function () {
  "use strict";

  var submitting = false;

  function typing(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName;
    return (
      tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" ||
      target.isContentEditable
    );
  }

  function rows() {
    return Array.prototype.slice.call(
      document.querySelectorAll("#queue-rows tr.row")
    );
  }

  function selected() {
    return document.querySelector("#queue-rows tr.row.selected");
  }

  function select(row) {
    var current = selected();
    if (current) {
      current.classList.remove("selected");
      current.removeAttribute("aria-selected");
    }
    if (!row) return;
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
    row.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var index = all.indexOf(selected());
    var next = index < 0 ? 0 : Math.min(Math.max(index + step, 0), all.length - 1);
    select(all[next]);
  }

  function submit(form, button) {
    // A second key press while the page is leaving would post twice.
    if (!form || submitting) return;
    submitting = true;
    if (form.requestSubmit) form.requestSubmit(button || undefined);
    else form.submit();
  }

  function decide(decision) {
    var form = document.getElementById("decision");
    if (!form) return false;
    var button = form.querySelector('button[data-decision="' + decision + '"]');
    if (!button) return false;
    submit(form, button);
    return true;
  }

  function toggleHelp() {
    var dialog = document.getElementById("keys-help");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) {
      return;
    }
    var target = event.target;
    // Overturn: the verdict select has focus; Enter records the overturn.
    if (target && target.matches && target.matches("[data-overturn-verdict]")) {
      if (event.key === "Enter") {
        event.preventDefault();
        decide("overturn");
      } else if (event.key === "Escape") {
        target.blur();
      }
      return;
    }
    if (typing(target)) {
      if (event.key === "Escape") target.blur();
      return;
    }
    var dialog = document.getElementById("keys-help");
    if (dialog && dialog.open && event.key !== "?") return;

    switch (event.key) {
      case "j":
        move(1);
        break;
      case "k":
        move(-1);
        break;
      case "Enter": {
        var row = selected();
        if (!row || (target && target.closest && target.closest("a, button"))) {
          return;
        }
        window.location.href = row.getAttribute("data-href");
        break;
      }
      case "c":
        if (!decide("confirm")) return;
        break;
      case "o": {
        var verdict = document.querySelector("[data-overturn-verdict]");
        if (!verdict) return;
        verdict.focus();
        break;
      }
      case "r":
        if (!decide("rerun")) return;
        break;
      case "n": {
        var next = document.getElementById("next-form");
        if (!next) return;
        submit(next);
        break;
      }
      case "u": {
        var back = document.querySelector("a[data-back]");
        if (!back) return;
        window.location.href = back.href;
        break;
      }
      case "?":
        toggleHelp();
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-keys-help]");
    if (opener) toggleHelp();
    var row = event.target.closest && event.target.closest("#queue-rows tr.row");
    if (row) select(row);
  });

  // The first row starts selected, also after htmx swaps in a filtered page.
  function init() {
    if (!selected()) select(rows()[0]);
  }
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSettle", init);
  // The browser's back button can restore a page whose form was submitted.
  window.addEventListener("pageshow", function () {
    submitting = false;
  });
})();
