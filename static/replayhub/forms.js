// htmx forms show what the server refused, in place. htmx leaves 4xx answers
// unswapped by default, so a refused form would look as if nothing happened:
// a form answered 400, 409 or 422 (a page explaining why) is swapped like a
// success. Any other failed htmx request says so at the top of the page.
(function () {
  "use strict";

  var SHOWN = { 400: true, 409: true, 422: true };

  function fromForm(event) {
    var detail = event.detail || {};
    var elt = (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
    return !!(elt && elt.closest && elt.closest("form"));
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (SHOWN[xhr.status] && fromForm(event) && xhr.responseText) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function report(text) {
    var main = document.querySelector("main");
    if (!main) return;
    var list = main.querySelector("ul.messages");
    if (!list) {
      list = document.createElement("ul");
      list.className = "messages";
      main.insertBefore(list, main.firstChild);
    }
    var item = document.createElement("li");
    item.className = "error";
    item.setAttribute("role", "alert");
    item.textContent = text;
    list.appendChild(item);
  }

  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.shouldSwap) return;
    var status = event.detail.xhr.status;
    if (document.querySelector("form[data-upload]")) return; // upload.js says it
    report(
      status === 403
        ? "Not allowed: your role cannot do that."
        : "The server answered " + status + "; nothing was changed. Try again."
    );
  });
  document.addEventListener("htmx:sendError", function () {
    if (document.querySelector("form[data-upload]")) return;
    report("The server could not be reached; check the connection and try again.");
  });
})();

// A filter form asks only for filters not already shown: a select applies as
// it changes, so Filter or Show pressed after it would fetch the same results
// again and push a second, identical history entry (Back would need two).
(function () {
  "use strict";

  function normalized(params) {
    var kept = [];
    params.forEach(function (value, key) {
      if (value !== "") kept.push(key + "=" + value);
    });
    return kept.sort().join("&");
  }

  document.addEventListener("htmx:confirm", function (event) {
    var form = event.detail.elt;
    if (!form || form.tagName !== "FORM" || event.detail.verb !== "get") return;
    if (form.getAttribute("hx-push-url") !== "true") return;
    var url = new URL(event.detail.path, location.href);
    if (url.pathname !== location.pathname) return;
    var asked = normalized(new URLSearchParams(new FormData(form)));
    if (asked === normalized(new URLSearchParams(location.search))) {
      event.preventDefault();
    }
  });
})();

// A box that drops over the page (details.popover: "Ask for a second
// opinion") closes when the focus or a click goes outside it, as a menu
// does: left open, it would cover what Tab reaches next.
(function () {
  "use strict";

  function closeOutside(event) {
    var open = document.querySelectorAll("details.popover[open]");
    for (var i = 0; i < open.length; i++) {
      if (!open[i].contains(event.target)) open[i].open = false;
    }
  }

  document.addEventListener("focusin", closeOutside);
  document.addEventListener("click", closeOutside);
})();

// A plain filter form (data-filters-shown: the agreement page) is rendered
// with the filters its tables show. Back can bring the page again with the
// boxes as they were typed before its Show, while the tables are the
// address's: each box is set back to what the page was rendered with.
(function () {
  "use strict";

  window.addEventListener("pageshow", function () {
    var forms = document.querySelectorAll("form[data-filters-shown]");
    for (var i = 0; i < forms.length; i++) forms[i].reset();
  });
})();
