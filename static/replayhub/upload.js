// The upload page: how much of the file has gone up, then that the server is
// importing it; a refused file's explanation shown in place. The form works
// without this file, as a plain POST.
(function () {
  "use strict";

  // The form that sent the request (a swap event's own elt is its target).
  function uploadForm(event) {
    var detail = event.detail || {};
    var elt = (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
    return elt && elt.matches && elt.matches("form[data-upload]") ? elt : null;
  }

  function show(form, text, percent) {
    var bar = form.querySelector("progress");
    bar.hidden = false;
    if (percent === null) {
      bar.removeAttribute("value"); // indeterminate: the server is working
    } else {
      bar.value = percent;
    }
    form.querySelector("[data-upload-state]").textContent = text;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = uploadForm(event);
    if (!form) return;
    form.dataset.phase = "uploading";
    show(form, "Uploading…", 0);
  });

  // Fired for the upload, then for the response: only the first part counts.
  document.addEventListener("htmx:xhr:progress", function (event) {
    var form = uploadForm(event);
    if (!form || form.dataset.phase !== "uploading") return;
    var detail = event.detail;
    if (!detail.lengthComputable || !detail.total) return;
    if (detail.loaded >= detail.total) {
      form.dataset.phase = "importing";
      show(form, "Importing… a large file takes a while; keep this page open.", null);
    } else {
      var percent = Math.floor((detail.loaded / detail.total) * 100);
      show(form, "Uploading… " + percent + "%", percent);
    }
  });

  // A refused file (400, 413) comes back as the page explaining why.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var form = uploadForm(event);
    if (!form) return;
    var xhr = event.detail.xhr;
    if (xhr.status === 400 || xhr.status === 413) {
      if (xhr.responseText.indexOf('id="upload"') !== -1) {
        event.detail.shouldSwap = true;
        event.detail.isError = false;
      }
    }
  });

  function failed(event, text) {
    var form = uploadForm(event);
    if (!form || event.detail.shouldSwap) return;
    form.dataset.phase = "";
    form.querySelector("progress").hidden = true;
    form.querySelector("[data-upload-state]").textContent = text;
  }

  // Back to this page from the browser's back-forward cache, as it was left
  // when the import sent the browser on to its summary: the form is ready for
  // the next file again, not disabled under "Importing…".
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll("form[data-upload]").forEach(function (form) {
      form.dataset.phase = "";
      form.classList.remove("htmx-request");
      form.querySelector("progress").hidden = true;
      form.querySelector("[data-upload-state]").textContent = "";
      form.querySelectorAll("button").forEach(function (button) {
        button.disabled = false;
      });
    });
  });

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    failed(event, status === 413
      ? "The server refused the file as too large."
      : "The import failed (HTTP " + status + "); nothing more was imported. Try again.");
  });
  document.addEventListener("htmx:sendError", function (event) {
    failed(event, "The server could not be reached; check the connection and try again.");
  });
})();
