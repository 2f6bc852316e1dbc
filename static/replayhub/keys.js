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

  // What takes Enter for itself: a link, a button, a <summary> (it opens its
  // details), a field, and a diff's or log's line number (comments.js opens a
  // comment box there). Enter on one of them is never a page key.
  var TAKES_ENTER = "a, button, summary, input, select, textarea, " +
    "[contenteditable], [role=button]";

  function takesEnter(target) {
    return !!(target && target.closest && target.closest(TAKES_ENTER));
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
    keepPlace(row);
    // Up or down only: a table wider than the window must not scroll the
    // page sideways when a row is chosen.
    var x = window.scrollX;
    row.scrollIntoView({ block: "nearest", inline: "nearest" });
    if (window.scrollX !== x) window.scrollTo(x, window.scrollY);
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var index = all.indexOf(selected());
    var next = index < 0 ? 0 : Math.min(Math.max(index + step, 0), all.length - 1);
    select(all[next]);
    // Enter opens the chosen row: a control still focused from before (the
    // filters' button, after filtering) would take the Enter for itself.
    var focused = document.activeElement;
    if (focused && focused !== document.body && !all[next].contains(focused)) {
      focused.blur();
    }
  }

  function submit(form, button) {
    // A second key press while the page is leaving would post twice.
    if (!form || submitting) return;
    submitting = true;
    // A button is clicked, not named to requestSubmit: htmx (the decision
    // form) learns which button sent the form from its click.
    if (button) button.click();
    else if (form.requestSubmit) form.requestSubmit();
    else form.submit();
  }

  // A replay already decided (the form's data-decided): a decision key asks
  // first. The first press says what stands; the same key again, or Enter,
  // records a second decision beside it, and Esc keeps the one standing. A
  // rerun asks first on any replay, as an overturn waits for its Enter: it
  // queues a new replay of the run, spending the night's budget.
  var again = null;
  var AGAIN_KEYS = { confirm: "c", rerun: "r", overturn: "Enter" };
  var AGAIN_VERBS = {
    confirm: "confirm it again",
    rerun: "ask for a rerun",
    overturn: "overturn it"
  };

  function decidedNote() {
    return document.getElementById("decided-note") ||
      document.getElementById("decision-asked");
  }

  function askAgain(form, decision) {
    again = decision;
    var key = AGAIN_KEYS[decision];
    var note = decidedNote();
    if (!note) return;
    if (!form.hasAttribute("data-decided")) {
      // Only a rerun asks on a replay not decided yet.
      note.textContent = "Press r again or Enter to ask for a rerun: a new " +
        "replay of this run is queued. Esc asks for nothing.";
      note.hidden = false;
      note.classList.remove("muted");
      note.classList.add("bad");
      return;
    }
    var standing = form.getAttribute("data-decided");
    var verb = AGAIN_VERBS[decision];
    if (decision === "confirm") {
      // Name the verdict a confirm records: the automated one, which is not
      // the standing one once it was overturned.
      var preview = document.getElementById("overturn-preview");
      var automated = preview && preview.getAttribute("data-from");
      if (automated) {
        verb = "confirm " + automated +
          (form.getAttribute("data-standing") === automated ? " again" : "");
      }
    }
    note.textContent = "Already decided" + (standing ? " as " + standing : "") +
      ". Press " + key + (key === "Enter" ? "" : " again or Enter") + " to " +
      verb + " as a second decision; Esc keeps it as it is.";
    note.classList.remove("muted");
    note.classList.add("bad");
  }

  function keepStanding() {
    if (!again) return false;
    again = null;
    var note = decidedNote();
    if (note) {
      note.textContent = "Kept as it is: nothing recorded.";
      note.classList.remove("bad");
      note.classList.add("muted");
    }
    return true;
  }

  // A replay opened by the decision just taken on the one before (the Undo
  // bar says so) takes no c for a moment: a double press of c meant for the
  // replay before would otherwise confirm this one, which the reviewer has
  // not seen yet. Counted from when the page shows, again after Back.
  var SETTLE_MS = 700;
  var shownAt = performance.now();

  function settling(decision) {
    if (decision !== "confirm" || !document.getElementById("undo")) return false;
    if (performance.now() - shownAt >= SETTLE_MS) return false;
    var note = decidedNote();
    if (note) {
      note.textContent = "Just opened: look at this replay first, then press c " +
        "to confirm it. Nothing recorded.";
      note.hidden = false;
    }
    return true;
  }

  function decide(decision) {
    var form = document.getElementById("decision");
    if (!form) return false;
    var button = form.querySelector('button[data-decision="' + decision + '"]');
    if (!button) return false;
    if (settling(decision)) return true;
    var asks = form.hasAttribute("data-decided") || decision === "rerun";
    if (asks && again !== decision) {
      askAgain(form, decision);
      return true;
    }
    again = null;
    submit(form, button);
    return true;
  }

  // Overturn: a digit chooses the corrected verdict, the choice is shown, and
  // Enter records it. Choosing never records; an overturn that contradicts
  // verified evidence needs a second Enter.
  var armed = false;

  function verdictSelect() {
    return document.querySelector("[data-overturn-verdict]");
  }

  function chosen(select) {
    return select && select.value ? select.options[select.selectedIndex] : null;
  }

  function showChoice() {
    var select = verdictSelect();
    var preview = document.getElementById("overturn-preview");
    armed = false;
    if (!select || !preview) return;
    var option = chosen(select);
    preview.classList.remove("bad");
    if (!option) {
      preview.textContent = "Press 1–4 to choose the corrected verdict.";
      return;
    }
    var name = option.textContent.replace(/^\d\s*·\s*/, "").toLowerCase();
    var text = "Overturn " + preview.getAttribute("data-from") + " → " + name +
      ": Enter records it, Esc cancels.";
    var against = option.getAttribute("data-contradicts");
    if (against) {
      text = against + " " + text;
      preview.classList.add("bad");
    }
    preview.textContent = text;
  }

  function chooseVerdict(key) {
    var select = verdictSelect();
    if (!select) return false;
    var option = select.querySelector('option[data-key="' + key + '"]');
    select.focus();
    if (!option) {
      // Every verdict has a key; the one with no option is the replay's own.
      // Said where the choice is said, and nothing stays chosen.
      var preview = document.getElementById("overturn-preview");
      var keys = select.querySelectorAll("option[data-key]").length + 1;
      select.value = "";
      armed = false;
      if (!preview) return true;
      preview.classList.remove("bad");
      var from = preview.getAttribute("data-from");
      var form = document.getElementById("decision");
      var standing = form && form.getAttribute("data-standing");
      // The key of the automated verdict: what stands is the reviewers'
      // verdict once it was overturned, and a confirm records the automated one.
      var said = standing && standing !== from
        ? "Now " + standing + " (overturned); " + from +
          " is the automated verdict: press c to confirm it, or choose another."
        : "Already " + from + ": choose another verdict.";
      preview.textContent = parseInt(key, 10) <= keys
        ? said
        : "Press 1–" + keys + " to choose the corrected verdict.";
      return true;
    }
    select.value = option.value;
    showChoice();
    return true;
  }

  function recordOverturn(select) {
    var option = chosen(select);
    if (!option) {
      showChoice();
      return;
    }
    var overrule = document.querySelector("#decision input[name=overrule]");
    if (option.getAttribute("data-contradicts") && overrule && !overrule.value) {
      if (!armed) {
        armed = true;
        var preview = document.getElementById("overturn-preview");
        if (preview) {
          preview.textContent = option.getAttribute("data-contradicts") +
            " Press Enter again to overrule the verified evidence.";
        }
        return;
      }
      overrule.value = "on";
    }
    decide("overturn");
  }

  function cancelOverturn(select) {
    keepStanding();
    select.value = "";
    var preview = document.getElementById("overturn-preview");
    if (preview) preview.textContent = "";
    armed = false;
    select.blur();
  }

  // Blind review: the reviewer names a verdict of their own (#blind-verdict).
  // A digit chooses it and says so, Enter records it, Esc clears the choice;
  // confirm and overturn are no keys there, and say so.
  function blindKey(key, target) {
    var select = document.getElementById("blind-verdict");
    if (!select) return false;
    var said = document.getElementById("blind-preview");
    // The verdicts in the select's order, the same as the overturn's keys.
    var options = select.querySelectorAll('option:not([value=""])');
    var option = null;
    var text = null;
    if (/^[1-9]$/.test(key)) {
      option = options[parseInt(key, 10) - 1] || null;
      if (option) select.value = option.value;
      text = option
        ? "Your verdict: " + option.textContent.toLowerCase() +
          ". Enter records it, Esc clears it."
        : "Press 1–" + options.length + " to choose your verdict.";
    } else if (key === "c" || key === "o") {
      text = "Blind review: no confirm or overturn here. Press 1–" +
        options.length + " to choose your verdict, then Enter to record it.";
    } else if (key === "Enter") {
      // Enter after r (a rerun asked for) sends the rerun.
      if (again || takesEnter(target)) return false;
      if (!select.value) {
        text = "Choose your verdict first: press 1–" + options.length + ".";
      } else {
        submit(select.form, select.form.querySelector("button[data-blind-record]"));
        return true;
      }
    } else if (key === "Escape") {
      if (!select.value) return false;
      select.value = "";
      text = "Cleared: nothing recorded.";
    } else {
      return false;
    }
    if (said) said.textContent = text;
    return true;
  }

  // A replay someone else holds has no decision form: c, o and r say whose it
  // is instead of doing nothing.
  function heldKey(key) {
    var said = document.getElementById("held-said");
    if (!said || (key !== "c" && key !== "o" && key !== "r")) return false;
    said.textContent = said.getAttribute("data-holder") +
      " holds this replay: no confirm, overturn or rerun here until it is " +
      "released, expires or is handed to you.";
    return true;
  }

  // The flash bar's Undo, just after deciding; once it is gone (the page
  // reloaded), the decisions' own Undo, which the page draws only beside the
  // viewer's latest decision here while it can still be taken back.
  var UNDO_ACTION = /\/reviews\/\d+\/undo\/(?:\?|$)/;

  function undoButton() {
    var bar = document.querySelector("#undo button[data-undo]");
    if (bar) return bar;
    var forms = document.querySelectorAll("#history .review form[action]");
    var found = Array.prototype.filter.call(forms, function (form) {
      return UNDO_ACTION.test(form.getAttribute("action"));
    });
    if (found.length !== 1) return null;
    return found[0].querySelector("button[type=submit]");
  }

  function toggleHelp() {
    var dialog = document.getElementById("keys-help");
    if (!dialog) return;
    if (dialog.open) {
      dialog.close();
      return;
    }
    // Opened at its top, on the dialog itself (its autofocus): scrolled
    // down where it was left, or to the Close button at its foot, a help
    // taller than the screen would hide its heading and first keys.
    dialog.scrollTop = 0;
    dialog.showModal();
    dialog.focus({ preventScroll: true });
    dialog.scrollTop = 0;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) {
      return;
    }
    var target = event.target;
    // Overturn: the verdict select has focus. A digit chooses, Enter records,
    // Esc cancels; letters do nothing (two verdicts start with "i").
    if (target && target.matches && target.matches("[data-overturn-verdict]")) {
      if (event.key === "Enter") {
        event.preventDefault();
        recordOverturn(target);
      } else if (event.key === "Escape") {
        event.preventDefault();
        cancelOverturn(target);
      } else if (/^[1-9]$/.test(event.key)) {
        event.preventDefault();
        chooseVerdict(event.key);
      } else if (event.key.length === 1) {
        event.preventDefault();
        showChoice();
      }
      return;
    }
    // A label's select (focused by a refusal naming it) still takes the
    // label's own key, shown beside it, instead of the select's type-ahead.
    var holder = target && target.closest && target.closest("#labels [data-label-key]");
    if (holder && target.tagName === "SELECT" &&
        event.key === holder.getAttribute("data-label-key") && stepLabel(event.key)) {
      event.preventDefault();
      return;
    }
    if (typing(target)) {
      if (event.key === "Escape") target.blur();
      return;
    }
    var dialog = document.getElementById("keys-help");
    if (dialog && dialog.open && event.key !== "?") return;
    if (blindKey(event.key, target)) {
      event.preventDefault();
      return;
    }
    if (heldKey(event.key)) {
      event.preventDefault();
      return;
    }

    switch (event.key) {
      case "j":
        move(1);
        break;
      case "k":
        move(-1);
        break;
      case "Enter": {
        var onControl = takesEnter(target);
        if (again && !onControl) {
          decide(again);
          break;
        }
        var row = selected();
        if (!row || onControl) {
          return;
        }
        window.location.href = row.getAttribute("data-href");
        break;
      }
      case "Escape":
        if (!keepStanding()) return;
        break;
      case "c":
        if (!decide("confirm")) return;
        break;
      case "o": {
        var verdict = verdictSelect();
        if (!verdict) return;
        verdict.focus();
        showChoice();
        break;
      }
      case "1":
      case "2":
      case "3":
      case "4":
        if (!chooseVerdict(event.key)) return;
        break;
      case "z": {
        var undo = undoButton();
        if (!undo) return;
        submit(undo.form);
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
      case "e": {
        // Extending stays on the page (htmx swaps the claim box): no submit().
        var extend = document.getElementById("extend-form");
        if (!extend) return;
        if (extend.requestSubmit) extend.requestSubmit();
        else extend.submit();
        break;
      }
      default:
        if (!stepLabel(event.key)) return;
    }
    event.preventDefault();
  });

  // A label's key steps its select to the next value, past the last to none.
  function stepLabel(key) {
    if (!/^[a-z]$/.test(key)) return false;
    var holder = document.querySelector('#labels [data-label-key="' + key + '"]');
    var select = holder && holder.querySelector("select");
    if (!select) return false;
    select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    holder.classList.add("stepped");
    return true;
  }

  // A claim about to lapse says so a minute before, and "e" extends it. The
  // time left is counted from the server's clock at render, not the browser's.
  var WARN_SECONDS = 60;
  var claimTimer = null;

  function watchClaim() {
    var mine = document.getElementById("claim-mine");
    if (claimTimer) window.clearInterval(claimTimer);
    claimTimer = null;
    if (!mine) return;
    var left = parseInt(mine.getAttribute("data-expires"), 10) -
      parseInt(mine.getAttribute("data-now"), 10);
    var started = Date.now();
    function tick() {
      var warning = document.getElementById("claim-warning");
      if (!warning) return;
      var now = Math.round(left - (Date.now() - started) / 1000);
      if (now > WARN_SECONDS) {
        warning.hidden = true;
        return;
      }
      warning.hidden = false;
      warning.textContent = now > 0
        ? "Your claim lapses in " + now + " s: press e to extend it."
        : "Your claim has lapsed: press e to claim it again.";
    }
    tick();
    claimTimer = window.setInterval(tick, 1000);
  }
  // "finished 12s ago" keeps counting while the page stays open, in the
  // server's clock (data-now at render) as the page first said it.
  function compact(seconds) {
    seconds = Math.max(Math.floor(seconds), 0);
    if (seconds < 60) return seconds + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m";
    if (seconds < 86400) return Math.floor(seconds / 3600) + "h";
    return Math.floor(seconds / 86400) + "d";
  }

  function watchAges() {
    if (!document.querySelector("time[data-ago]")) return;
    // Each time counted from when it was drawn: a page swapped in by htmx
    // (a refused decision) draws its own, with the server's clock then.
    var drawn = new WeakMap();
    function tick() {
      var now = Date.now();
      document.querySelectorAll("time[data-ago]").forEach(function (age) {
        if (!drawn.has(age)) drawn.set(age, now);
        var passed = (now - drawn.get(age)) / 1000;
        var since = parseInt(age.getAttribute("data-now"), 10) -
          parseInt(age.getAttribute("data-ago"), 10);
        if (!isNaN(since)) age.textContent = compact(since + passed);
      });
    }
    window.setInterval(tick, 1000);
  }
  document.addEventListener("DOMContentLoaded", watchAges);
  document.addEventListener("DOMContentLoaded", watchClaim);
  // The claim box is swapped whole when the claim is extended.
  document.addEventListener("htmx:afterSettle", watchClaim);

  // Claim next takes the queue's filters as they are now (htmx filtering
  // pushes them to the address bar), not as the page was first drawn.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-with-filters]")) return;
    var query = new URLSearchParams(window.location.search);
    query.delete("after");
    query.delete("at");
    var search = query.toString();
    form.action = form.getAttribute("action").split("?")[0] +
      (search ? "?" + search : "");
  }, true);

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-keys-help]");
    if (opener) toggleHelp();
    var row = event.target.closest && event.target.closest("#queue-rows tr.row");
    if (row) select(row);
  });

  // The queue's place: the row chosen and the few below it, kept in the
  // history entry's state (Back comes back to it) and in the tab's session
  // (a replay's page links back with ?at=<its id>, and u follows that link).
  // A row no longer queued (decided since) gives its place to the first of
  // the rows that were below it.
  var PLACE = "replayhub.queue.place";
  var FOLLOWING = 10;
  var chosenId = null;

  // A row's replay id, from the address of the replay's page it opens.
  function rowId(row) {
    var found = /\/(\d+)\/(?:[?#]|$)/.exec(row.getAttribute("data-href") || "");
    return found ? found[1] : null;
  }

  function keepPlace(row) {
    var all = rows();
    var index = all.indexOf(row);
    var place = {
      row: rowId(row),
      next: all.slice(index + 1, index + 1 + FOLLOWING).map(rowId)
    };
    chosenId = place.row;
    try {
      var state = Object.assign({}, window.history.state, { queuePlace: place });
      window.history.replaceState(state, "");
      window.sessionStorage.setItem(PLACE, JSON.stringify(place));
    } catch (e) { /* refused: the place is kept for this page only */ }
  }

  function storedPlace() {
    try {
      return JSON.parse(window.sessionStorage.getItem(PLACE) || "null");
    } catch (e) { return null; }
  }

  // The rows to choose, first present first: this entry's own place (Back),
  // the row chosen before htmx swapped the rows, the replay ?at= names.
  function wantedIds() {
    var state = window.history.state && window.history.state.queuePlace;
    if (state && state.row) return [state.row].concat(state.next || []);
    if (chosenId) return [chosenId];
    var at = new URLSearchParams(window.location.search).get("at");
    if (!at) return [];
    var stored = storedPlace();
    return [at].concat(stored && stored.row === at ? stored.next || [] : []);
  }

  function placed() {
    var byId = {};
    rows().forEach(function (row) { byId[rowId(row)] = row; });
    var wanted = wantedIds();
    for (var i = 0; i < wanted.length; i++) {
      if (byId[wanted[i]]) return byId[wanted[i]];
    }
    return null;
  }

  // The row of the queue's place starts selected, else the first, also
  // after htmx swaps in a filtered page.
  function init() {
    if (!selected()) select(placed() || rows()[0]);
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("[data-overturn-verdict]")) {
      showChoice();
    }
  });
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSettle", init);
  // A refused decision: the focus goes to what needs fixing (a label left
  // unset, else the refusal in the bar), not to the top of the page.
  function focusRefusal() {
    var form = document.getElementById("decision");
    if (!form) return;
    var field = form.querySelector("label.invalid select, label.invalid input");
    var said = document.getElementById("decision-errors") ||
      document.getElementById("decided-meanwhile");
    if (field) field.focus();
    else if (said) said.focus();
  }
  document.addEventListener("DOMContentLoaded", focusRefusal);

  // A decision sent with htmx and refused (400, 409): the page is swapped in
  // place, and its keys start afresh, as on a page just loaded; a decision
  // taken sends the browser on (no swap), so keys stay spent until then. A
  // request that failed (no answer, a 500) leaves the form as it was.
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (!elt || elt.id !== "decision") return;
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 0 || status >= 400) submitting = false;
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!document.getElementById("decision")) return;
    var target = event.detail.target;
    if (!target || !target.querySelector || !target.querySelector("#decision")) return;
    // Reset here too: the request's own end is told on the form it swapped
    // out, which no longer reaches this document.
    submitting = false;
    again = null;
    armed = false;
    focusRefusal();
    watchBar();
  });

  // The sticky decision bar keeps to a sixth of the screen's height: past it
  // (a warning shown, a small window) it stays in the page instead. What is
  // scrolled to (a Tab, a link to a thread) stops below the bar's foot.
  function fitBar() {
    var bar = document.getElementById("decision");
    if (!bar) return;
    bar.classList.remove("unstuck");
    var height = bar.getBoundingClientRect().height;
    var tall = height > window.innerHeight / 6;
    bar.classList.toggle("unstuck", tall);
    document.documentElement.style.setProperty("--decision-bar", (tall ? 0 : height) + "px");
  }
  var barWatched = null;
  function watchBar() {
    var bar = document.getElementById("decision");
    if (!bar) return;
    fitBar();
    if (!window.ResizeObserver) return;
    // A bar swapped in (a refused decision) is watched instead of the old.
    if (barWatched) barWatched.disconnect();
    barWatched = new ResizeObserver(fitBar);
    barWatched.observe(bar);
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (!document.getElementById("decision")) return;
    window.addEventListener("resize", fitBar);
    watchBar();
  });

  // The browser's back button can restore a page whose form was submitted.
  window.addEventListener("pageshow", function (event) {
    submitting = false;
    if (event.persisted) shownAt = performance.now();
  });
})();
