// Line comments: clicking a line number of a diff (or a line of a test output)
// fills the comment form below with that place; Shift-click extends the range.
// The form works without this file: it only fills in the fields and focuses.
(function () {
  "use strict";

  var anchor = null; // {target, path, side, line, el}

  function form() {
    return document.getElementById("comment-form");
  }

  // A diff line is its table row; a test output line is its own span (the
  // row around it is the whole test run).
  function lineOf(cell) {
    return cell.tagName === "TD" ? cell.closest("tr") : cell;
  }

  function clearPicked() {
    var picked = document.querySelectorAll(".picked");
    for (var i = 0; i < picked.length; i++) picked[i].classList.remove("picked");
  }

  function mark(container, side, start, end) {
    clearPicked();
    var cells = container.querySelectorAll("[data-line]");
    for (var i = 0; i < cells.length; i++) {
      var cell = cells[i];
      var line = parseInt(cell.getAttribute("data-line"), 10);
      var cellSide = cell.getAttribute("data-side") || "";
      if (cellSide === side && line >= start && line <= end) {
        lineOf(cell).classList.add("picked");
      }
    }
  }

  function pick(cell, extend) {
    var container = cell.closest("[data-target]");
    var f = form();
    if (!container || !f) return;
    var here = {
      target: container.getAttribute("data-target"),
      path: container.getAttribute("data-path"),
      side: cell.getAttribute("data-side") || "",
      line: parseInt(cell.getAttribute("data-line"), 10),
      container: container
    };
    var start = here.line;
    var end = here.line;
    if (
      extend && anchor && anchor.container === container && anchor.side === here.side
    ) {
      start = Math.min(anchor.line, here.line);
      end = Math.max(anchor.line, here.line);
    } else {
      anchor = here;
    }
    f.querySelector("#comment-target").value = here.target;
    f.querySelector("#comment-path").value = here.path;
    f.querySelector("#comment-side").value = here.side;
    f.querySelector("#comment-start").value = String(start);
    f.querySelector("#comment-end").value = end === start ? "" : String(end);
    mark(container, here.side, start, end);
    var body = f.querySelector("#comment-body");
    body.scrollIntoView({ block: "center" });
    body.focus({ preventScroll: true });
  }

  document.addEventListener("click", function (event) {
    var cell = event.target.closest && event.target.closest("[data-line]");
    if (!cell || !cell.closest("[data-target]")) return;
    event.preventDefault();
    pick(cell, event.shiftKey);
  });

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (!target.matches || !target.matches("textarea[data-submit-on-ctrl-enter]")) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      var owner = target.form;
      if (owner && owner.reportValidity()) {
        if (owner.requestSubmit) owner.requestSubmit();
        else owner.submit();
      }
    } else if (event.key === "Escape" && target.id === "comment-body") {
      clearPicked();
      anchor = null;
      target.blur();
    }
  });

  // Lines that carry a thread are marked where they are shown; the mark's
  // title names the thread, and clicking it scrolls there.
  function markThreads(root) {
    var data = document.getElementById("comment-marks");
    if (!data) return;
    var marks = JSON.parse(data.textContent || "[]");
    var containers = (root || document).querySelectorAll("[data-target][data-path]");
    for (var c = 0; c < containers.length; c++) {
      var box = containers[c];
      for (var m = 0; m < marks.length; m++) {
        var mark = marks[m];
        if (
          box.getAttribute("data-target") !== mark.target ||
          box.getAttribute("data-path") !== mark.path
        ) continue;
        var cells = box.querySelectorAll("[data-line]");
        for (var i = 0; i < cells.length; i++) {
          var cell = cells[i];
          var line = parseInt(cell.getAttribute("data-line"), 10);
          if ((cell.getAttribute("data-side") || "") !== mark.side) continue;
          if (line < mark.start || line > mark.end) continue;
          var row = lineOf(cell);
          row.classList.add(mark.resolved ? "commented-resolved" : "commented");
          row.setAttribute("data-thread", String(mark.thread));
          row.title = "Comment thread #" + mark.thread;
        }
      }
    }
  }

  document.addEventListener("DOMContentLoaded", function () { markThreads(); });
  document.addEventListener("htmx:afterSwap", function (event) {
    markThreads(event.target);
  });
})();
