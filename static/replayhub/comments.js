// Line comments: clicking a line number of a diff (or a line of a test output)
// opens a comment box under that line, fetched with htmx; Shift-click extends
// the range. Threads are moved from the list at the page's foot to the line
// they are about, wherever that line is shown. Without this file the form at
// the foot still works, and every thread stays in the list.
(function () {
  "use strict";

  var anchor = null; // {target, path, side, line, container}
  var opener = null; // the line number the open box was opened from

  function section() {
    return document.getElementById("comments");
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

  function cellsOf(container, side) {
    var found = [];
    var cells = container.querySelectorAll("[data-line]");
    for (var i = 0; i < cells.length; i++) {
      if ((cells[i].getAttribute("data-side") || "") === side) found.push(cells[i]);
    }
    return found;
  }

  function cellAt(container, side, line) {
    var cells = cellsOf(container, side);
    for (var i = 0; i < cells.length; i++) {
      if (parseInt(cells[i].getAttribute("data-line"), 10) === line) return cells[i];
    }
    return null;
  }

  function mark(container, side, start, end) {
    clearPicked();
    var cells = cellsOf(container, side);
    for (var i = 0; i < cells.length; i++) {
      var line = parseInt(cells[i].getAttribute("data-line"), 10);
      if (line >= start && line <= end) lineOf(cells[i]).classList.add("picked");
    }
  }

  // Rows that follow a line and belong to it: threads and an open box.
  function afterLine(row) {
    var last = row;
    var next = row.nextElementSibling;
    while (next && next.classList.contains("thread-row")) {
      last = next;
      next = next.nextElementSibling;
    }
    return last;
  }

  function openBox() {
    return document.querySelector(".comment-row");
  }

  function closeBox() {
    var box = openBox();
    if (box) box.remove();
    clearPicked();
  }

  // What was typed in the box a wider pick replaced, for the box that comes.
  var pendingTyped = "";

  // A box is focused when it lands in the page (only a box still there does).
  document.addEventListener("htmx:load", function (event) {
    var box = event.detail && event.detail.elt;
    if (!box || !box.matches || !box.matches(".comment-row") || !box.isConnected) return;
    var body = box.querySelector("textarea");
    if (!body) return;
    if (pendingTyped && !body.value) body.value = pendingTyped;
    pendingTyped = "";
    body.focus({ preventScroll: true });
    box.scrollIntoView({ block: "nearest" });
  });

  // Whether the request under way was sent from a comment box or a thread
  // (a comment, a reply, a resolve): only its answer may move the focus.
  var sentFromThread = false;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    sentFromThread = !!(elt && elt.closest && elt.closest(".comment-row, article.thread"));
  });

  // A comment sent from its box: the focus goes back to the line it is on,
  // so the next Tab goes on from there, not from the top of the page. Never
  // at the page's own load (htmx's first htmx:load is the whole body): the
  // first Tab there is the skip link's.
  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!sentFromThread || !elt || !elt.matches) return;
    var thread = elt.matches("article.thread") ? elt : elt.querySelector("article.thread");
    if (!thread) return;
    sentFromThread = false;
    var focused = document.activeElement;
    if (!thread.isConnected || (focused && focused !== document.body)) return;
    var container = document.querySelector(
      '[data-target="' + CSS.escape(thread.getAttribute("data-target") || "") +
      '"][data-path="' + CSS.escape(thread.getAttribute("data-path") || "") +
      '"]:not(article)'
    );
    if (!container) return;
    var side = thread.getAttribute("data-side") || "";
    var line = container.querySelector(
      '[data-line="' + CSS.escape(thread.getAttribute("data-start") || "") + '"]' +
      (side ? '[data-side="' + CSS.escape(side) + '"]' : "")
    );
    if (!line) return;
    var current = container.querySelector('[data-line][tabindex="0"]');
    if (current) current.setAttribute("tabindex", "-1");
    line.setAttribute("tabindex", "0");
    line.focus({ preventScroll: true });
  });

  function pick(cell, extend) {
    var container = cell.closest("[data-target]");
    var comments = section();
    if (!container || !comments || !comments.getAttribute("data-comment-new")) return;
    opener = cell;
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
    // What was typed in a box that is moved to a wider range goes with it;
    // a placeholder whose box has not arrived yet passes on what it was to
    // be given (widened twice in a row, the text is kept).
    var old = openBox();
    var oldArea = old && old.querySelector("textarea");
    var typed = oldArea ? oldArea.value : old ? pendingTyped : "";
    closeBox();
    mark(container, here.side, start, end);
    var last = cellAt(container, here.side, end) || cell;
    var params = new URLSearchParams({
      target: here.target,
      path: here.path,
      side: here.side,
      line_start: String(start),
      line_end: String(end)
    });
    var url = comments.getAttribute("data-comment-new") + "?" + params.toString();
    // A placeholder takes the box's place at once: a second click removes it,
    // and an answer that arrives for a removed placeholder lands nowhere.
    var row = lineOf(last);
    var holder = document.createElement(row.tagName === "TR" ? "tr" : "div");
    holder.className = "comment-row";
    afterLine(row).after(holder);
    pendingTyped = typed;
    htmx.ajax("GET", url, { target: holder, swap: "outerHTML" });
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.closest && target.closest("[data-cancel-comment]")) {
      closeBox();
      anchor = null;
      if (opener && opener.isConnected) moveTo(opener);
      return;
    }
    if (target.closest && target.closest(".comment-row, .thread-row")) return;
    var cell = target.closest && target.closest("[data-line]");
    if (!cell || !cell.closest("[data-target]")) return;
    event.preventDefault();
    pick(cell, event.shiftKey);
  });

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (!target.matches || !target.matches("textarea[data-submit-on-ctrl-enter]")) return;
    if (event.defaultPrevented) return; // the @ list took the key
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      var owner = target.form;
      if (owner && owner.reportValidity()) {
        // A form htmx sends goes through htmx, as its button would send it.
        if (window.htmx && owner.hasAttribute("hx-post")) window.htmx.trigger(owner, "submit");
        else if (owner.requestSubmit) owner.requestSubmit();
        else owner.submit();
      }
    } else if (event.key === "Escape" && target.closest(".comment-row")) {
      // Back to the line number the box came from: left on the page's body,
      // the next letter typed would be a page key (n for next, r for rerun).
      event.preventDefault();
      closeBox();
      anchor = null;
      if (opener && opener.isConnected) moveTo(opener);
    } else if (event.key === "Escape" && target.id === "comment-body") {
      clearPicked();
      anchor = null;
      target.blur();
    }
  });

  // The line number a box is about: the one it was opened from while that
  // is one of its lines, else its range's last line (under which it sits).
  function lineOfBox(box) {
    var form = box.querySelector("form");
    var container = box.closest("[data-target]");
    if (!form || !container) return null;
    var side = form.elements.side ? form.elements.side.value : "";
    var start = parseInt(form.elements.line_start && form.elements.line_start.value, 10);
    var end = parseInt(form.elements.line_end && form.elements.line_end.value, 10);
    if (opener && opener.isConnected && opener.closest("[data-target]") === container) {
      var line = parseInt(opener.getAttribute("data-line"), 10);
      var same = (opener.getAttribute("data-side") || "") === side;
      if (same && line >= start && line <= end) return opener;
    }
    return cellAt(container, side, end);
  }

  // Shift+Tab from a box's first field goes back to the box's own line number
  // (the help's way to a range: then Down and Shift+Enter), whatever sits
  // between them in the page: the threads drawn under that line would take
  // the focus, and the range's Shift+Enter would resolve one of them.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Tab" || !event.shiftKey || event.defaultPrevented) return;
    var box = event.target.closest && event.target.closest(".comment-row");
    if (!box) return;
    var first = box.querySelector(
      "textarea, input:not([type=hidden]), select, button, [tabindex]"
    );
    if (event.target !== first) return;
    var line = lineOfBox(box);
    if (!line) return;
    event.preventDefault();
    moveTo(line);
  });

  // Lines that carry a thread are marked where they are shown, and the thread
  // itself is drawn under its last line.
  function markLines() {
    var threads = document.querySelectorAll("article.thread[data-target]");
    for (var t = 0; t < threads.length; t++) {
      var thread = threads[t];
      var container = containerFor(thread);
      if (!container) continue;
      var start = parseInt(thread.getAttribute("data-start"), 10);
      var end = parseInt(thread.getAttribute("data-end"), 10);
      var resolved = thread.classList.contains("resolved");
      var cells = cellsOf(container, thread.getAttribute("data-side") || "");
      for (var i = 0; i < cells.length; i++) {
        var line = parseInt(cells[i].getAttribute("data-line"), 10);
        if (line < start || line > end) continue;
        var row = lineOf(cells[i]);
        row.classList.remove("commented", "commented-resolved");
        row.classList.add(resolved ? "commented-resolved" : "commented");
        row.setAttribute("data-thread", thread.id);
      }
    }
  }

  function containerFor(thread) {
    var containers = document.querySelectorAll("[data-target][data-path]:not(article)");
    for (var i = 0; i < containers.length; i++) {
      if (
        containers[i].getAttribute("data-target") === thread.getAttribute("data-target") &&
        containers[i].getAttribute("data-path") === thread.getAttribute("data-path")
      ) return containers[i];
    }
    return null;
  }

  function placeThreads() {
    var listed = document.querySelectorAll("#comments article.thread");
    for (var i = 0; i < listed.length; i++) {
      var thread = listed[i];
      var container = containerFor(thread);
      if (!container) continue;
      var cell = cellAt(
        container,
        thread.getAttribute("data-side") || "",
        parseInt(thread.getAttribute("data-end"), 10)
      );
      if (!cell) continue;
      var line = lineOf(cell);
      var holder;
      if (line.tagName === "TR") {
        holder = document.createElement("tr");
        var td = document.createElement("td");
        td.colSpan = line.children.length;
        holder.appendChild(td);
        td.appendChild(thread);
      } else {
        holder = document.createElement("div");
        holder.appendChild(thread);
      }
      holder.className = "thread-row";
      afterLine(line).after(holder);
    }
    var rest = document.querySelectorAll("#comments article.thread").length;
    var note = document.getElementById("threads-placed");
    if (note) note.hidden = rest > 0 || !document.querySelector(".thread-row");
  }

  // A link to a thread (an inbox notice) lands on it once it is in place.
  function reveal() {
    var id = window.location.hash.slice(1);
    if (!/^thread-\d+$/.test(id)) return;
    var thread = document.getElementById(id);
    if (!thread) return;
    var closed = thread.parentElement && thread.parentElement.closest("details:not([open])");
    while (closed) {
      closed.open = true;
      closed = closed.parentElement && closed.parentElement.closest("details:not([open])");
    }
    var own = thread.querySelector("details");
    if (own) own.open = true;
    // Its top, below the sticky decision bar (the page's scroll-padding).
    thread.scrollIntoView({ block: "start" });
  }

  // The keyboard's way to a line: one Tab stop per diff or output (its first
  // line number, or the last one focused), up and down move between its lines
  // of the same side, left and right to the other side's nearest line, Enter
  // opens the box there and Shift+Enter extends it.
  function focusable() {
    var comments = section();
    if (!comments || !comments.getAttribute("data-comment-new")) return;
    var containers = document.querySelectorAll("[data-target][data-path]:not(article)");
    for (var c = 0; c < containers.length; c++) {
      var cells = containers[c].querySelectorAll("[data-line]");
      var current = containers[c].querySelector('[data-line][tabindex="0"]');
      for (var i = 0; i < cells.length; i++) {
        var cell = cells[i];
        cell.setAttribute("tabindex", cell === (current || cells[0]) ? "0" : "-1");
        cell.setAttribute("role", "button");
        var side = cell.getAttribute("data-side");
        var label = "Comment on line " + cell.getAttribute("data-line") + (side ? " (" + side + ")" : "");
        // A log's line is its own text (the style sheet draws its number):
        // the name keeps that text, which the button's role would hide.
        if (cell.classList.contains("ol")) label += ": " + cell.textContent;
        cell.setAttribute("aria-label", label);
      }
    }
  }

  document.addEventListener("keydown", function (event) {
    var cell = event.target;
    if (!cell.matches || !cell.matches("[data-line][role=button]")) return;
    var container = cell.closest("[data-target]");
    if (!container) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      pick(cell, event.shiftKey);
      return;
    }
    var next = null;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      var step = event.key === "ArrowDown" ? 1 : -1;
      var side = cell.getAttribute("data-side") || "";
      var cells = cellsOf(container, side);
      next = cells[cells.indexOf(cell) + step] || neighbourFile(container, side, step);
      // Past the last line of the last file (or the first of the first) the
      // focus stays put, and the page does not scroll on under the sticky
      // decision bar as the browser's own arrow key would have it.
      event.preventDefault();
      if (!next) {
        cell.scrollIntoView({ block: "nearest", inline: "nearest" });
        return;
      }
    } else if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      next = across(container, cell, event.key === "ArrowLeft" ? "old" : "new");
    }
    if (!next) return;
    event.preventDefault();
    moveTo(next);
  });

  // The first line (``step`` 1) or last line (-1) of the file after or before
  // ``container`` among the same diff's files, on ``side`` when that file has
  // it, else on its other side; null when there is no such file.
  function neighbourFile(container, side, step) {
    var target = container.getAttribute("data-target");
    var all = document.querySelectorAll("[data-target][data-path]:not(article)");
    var files = Array.prototype.filter.call(all, function (each) {
      return each.getAttribute("data-target") === target && each.querySelector("[data-line][role=button]");
    });
    for (var i = files.indexOf(container) + step; i >= 0 && i < files.length; i += step) {
      var cells = cellsOf(files[i], side);
      if (!cells.length) cells = Array.prototype.slice.call(files[i].querySelectorAll("[data-line]"));
      if (cells.length) return step > 0 ? cells[0] : cells[cells.length - 1];
    }
    return null;
  }

  // The roving Tab stop of a diff or output moves to ``cell``, and the focus,
  // scrolled into view clear of the sticky decision bar (the page's
  // scroll-padding, which scrollIntoView keeps to).
  function moveTo(cell) {
    var container = cell.closest("[data-target]");
    var current = container && container.querySelector('[data-line][tabindex="0"]');
    if (current && current !== cell) current.setAttribute("tabindex", "-1");
    cell.setAttribute("tabindex", "0");
    cell.focus({ preventScroll: true });
    cell.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  // The line number of the other side nearest ``cell``: its own row's when
  // the row has one, else the closest row's above or below. A side with no
  // line at all (a new file's old side) has none.
  function across(container, cell, side) {
    if ((cell.getAttribute("data-side") || "") === side) return null;
    var all = Array.prototype.slice.call(container.querySelectorAll("[data-line]"));
    var here = all.indexOf(cell);
    var best = null;
    var distance = Infinity;
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-side") !== side) continue;
      var away = lineOf(all[i]) === lineOf(cell) ? 0 : Math.abs(i - here);
      if (away < distance) {
        best = all[i];
        distance = away;
      }
    }
    return best;
  }

  function draw() {
    // The first comment written at its line: "no comments yet" is no more.
    var none = document.getElementById("comments-none");
    if (none) none.hidden = !!document.querySelector("article.thread");
    markLines();
    placeThreads();
    focusable();
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw();
    reveal();
  });
  document.addEventListener("htmx:afterSwap", draw);

  // The server tells how many threads stay open after a comment, a reply, a
  // resolve or a reopen; the counts at the top and on the list follow.
  document.addEventListener("threadsChanged", function (event) {
    var open = event.detail.open;
    var top = document.getElementById("open-threads");
    if (top) {
      top.textContent = open + " unresolved comment" + (open === 1 ? "" : "s");
      top.hidden = open === 0;
    }
    var count = document.getElementById("comments-open");
    if (count) {
      count.textContent = open + " unresolved";
      count.hidden = open === 0;
    }
  });

  // @ offers the people a comment may mention, and a name that is nobody's is
  // flagged before sending (the server refuses it too). A name is judged once
  // it is complete: while the caret is still in it, "@rev" is a name being
  // typed, not an unknown one; leaving the box, Ctrl+Enter and sending judge
  // every name.
  var people = null;
  var asking = null;

  function loadPeople() {
    if (people || asking) return asking;
    var comments = section();
    var url = comments && comments.getAttribute("data-people");
    if (!url) return null;
    asking = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (data) {
        people = data.names || [];
        return people;
      });
    return asking;
  }

  var MENTION = /(^|[^\w.@+-])@([\w.@+-]*\w)/g;

  // The names mentioned in text, less the one starting at index skip (the
  // one being typed), if any.
  function mentionsIn(text, skip) {
    var found = [];
    var match;
    MENTION.lastIndex = 0;
    while ((match = MENTION.exec(text))) {
      var at = match.index + match[1].length + 1;
      if (at !== skip && found.indexOf(match[2]) < 0) found.push(match[2]);
    }
    return found;
  }

  function warningOf(area) {
    var next = area.parentElement.querySelector(".mention-warning");
    if (!next) {
      next = document.createElement("p");
      next.className = "mention-warning error";
      next.setAttribute("role", "alert");
      next.hidden = true;
      area.insertAdjacentElement("afterend", next);
    }
    return next;
  }

  // Every name when whole; otherwise all but the one the caret is in.
  function checkMentions(area, whole) {
    if (!people) return true;
    var typing = whole ? null : typedMention(area);
    var skip = typing ? typing.at : -1;
    var unknown = mentionsIn(area.value, skip).filter(function (name) {
      return people.indexOf(name) < 0;
    });
    var warning = warningOf(area);
    if (unknown.length) {
      var text = "No reviewer is called " + unknown.map(function (n) { return "@" + n; }).join(", ") +
        ": mention someone on the list, or drop the @.";
      warning.textContent = text;
      warning.hidden = false;
      area.setCustomValidity(text);
      return false;
    }
    warning.hidden = true;
    area.setCustomValidity("");
    return true;
  }

  // The word being typed after an @, if the caret is in one (at its end or
  // inside it): what comes before the caret, from the @ on.
  function typedMention(area) {
    var before = area.value.slice(0, area.selectionStart);
    var match = /(^|[^\w.@+-])@([\w.+-]*)$/.exec(before);
    return match ? { prefix: match[2], at: before.length - match[2].length } : null;
  }

  function listOf(area) {
    return area.parentElement.querySelector(".mention-list");
  }

  // The box is a combobox (ARIA 1.2): a screen reader hears the list open,
  // and which name the arrows are on, while the caret stays in the text.
  var listCount = 0;

  function asCombobox(area) {
    area.setAttribute("role", "combobox");
    area.setAttribute("aria-autocomplete", "list");
    if (!area.hasAttribute("aria-expanded")) area.setAttribute("aria-expanded", "false");
  }

  function choose(area, item) {
    if (item) area.setAttribute("aria-activedescendant", item.id);
    else area.removeAttribute("aria-activedescendant");
  }

  function closeList(area) {
    var list = listOf(area);
    if (list) list.remove();
    area.setAttribute("aria-expanded", "false");
    area.removeAttribute("aria-controls");
    choose(area, null);
  }

  function offer(area) {
    var typed = typedMention(area);
    closeList(area);
    if (!typed || !people) return;
    var names = people.filter(function (name) {
      return name.toLowerCase().indexOf(typed.prefix.toLowerCase()) === 0;
    }).slice(0, 8);
    if (!names.length) return;
    var list = document.createElement("ul");
    list.className = "mention-list";
    list.id = "mention-list-" + ++listCount;
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "People to mention");
    names.forEach(function (name, index) {
      var item = document.createElement("li");
      item.id = list.id + "-" + index;
      item.setAttribute("role", "option");
      item.setAttribute("data-name", name);
      item.textContent = "@" + name;
      if (index === 0) item.setAttribute("aria-selected", "true");
      list.appendChild(item);
    });
    area.insertAdjacentElement("afterend", list);
    asCombobox(area);
    area.setAttribute("aria-controls", list.id);
    area.setAttribute("aria-expanded", "true");
    choose(area, list.firstChild);
  }

  function accept(area, name) {
    var typed = typedMention(area);
    if (!typed) return;
    var end = area.selectionStart;
    area.value = area.value.slice(0, typed.at) + name + " " + area.value.slice(end);
    var caret = typed.at + name.length + 1;
    area.setSelectionRange(caret, caret);
    closeList(area);
    checkMentions(area, false);
    area.focus();
  }

  function isMentionBox(element) {
    return !!(element && element.matches && element.matches("textarea[data-mentions]"));
  }

  document.addEventListener("focusin", function (event) {
    if (isMentionBox(event.target)) {
      asCombobox(event.target);
      var waiting = loadPeople();
      if (waiting) waiting.then(function () { checkMentions(event.target, false); });
    }
  });

  // Leaving the box completes every name in it.
  document.addEventListener("focusout", function (event) {
    if (isMentionBox(event.target)) checkMentions(event.target, true);
  });

  // Sending judges every name, the one the caret is in too; a form with an
  // unknown name is not sent (htmx's listener on the form never hears it).
  document.addEventListener("submit", function (event) {
    var boxes = event.target.querySelectorAll ?
      event.target.querySelectorAll("textarea[data-mentions]") : [];
    for (var i = 0; i < boxes.length; i++) {
      if (!checkMentions(boxes[i], true)) {
        event.preventDefault();
        event.stopPropagation();
        boxes[i].reportValidity();
        return;
      }
    }
  }, true);

  document.addEventListener("input", function (event) {
    var area = event.target;
    if (!area.matches || !area.matches("textarea[data-mentions]")) return;
    var waiting = loadPeople();
    var then = function () {
      offer(area);
      checkMentions(area, false);
    };
    if (people) then();
    else if (waiting) waiting.then(then);
  });

  // Keys inside an open @ list: arrows move, Enter or Tab takes, Esc closes.
  // Ctrl+Enter sends: every name is judged before the form's validity is.
  document.addEventListener("keydown", function (event) {
    var area = event.target;
    if (!isMentionBox(area)) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      checkMentions(area, true);
    }
    var list = listOf(area);
    if (!list) return;
    var items = Array.prototype.slice.call(list.querySelectorAll("li"));
    var index = items.findIndex(function (item) {
      return item.getAttribute("aria-selected") === "true";
    });
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      var step = event.key === "ArrowDown" ? 1 : -1;
      var next = (index + step + items.length) % items.length;
      items[index].removeAttribute("aria-selected");
      items[next].setAttribute("aria-selected", "true");
      choose(area, items[next]);
    } else if ((event.key === "Enter" && !event.ctrlKey && !event.metaKey) || event.key === "Tab") {
      accept(area, items[Math.max(index, 0)].getAttribute("data-name"));
    } else if (event.key === "Escape") {
      closeList(area);
    } else {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
  }, true);

  document.addEventListener("mousedown", function (event) {
    var item = event.target.closest && event.target.closest(".mention-list li");
    if (!item) return;
    event.preventDefault();
    var area = item.parentElement.parentElement.querySelector("textarea[data-mentions]");
    if (area) accept(area, item.getAttribute("data-name"));
  });
})();
