// Copy buttons: a button[data-copy] copies the text of the element its value
// names to the clipboard and says "Copied", on itself and in the status its
// data-copy-status names (for a screen reader). It stays hidden where the
// page cannot reach the clipboard (no script, an insecure origin); the text
// stays selectable either way.
(function () {
  "use strict";

  function say(button, text) {
    button.textContent = text;
    var status = document.getElementById(button.getAttribute("data-copy-status") || "");
    if (status) status.textContent = text;
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!navigator.clipboard || !window.isSecureContext) return;
    var buttons = document.querySelectorAll("button[data-copy]");
    for (var i = 0; i < buttons.length; i++) buttons[i].hidden = false;
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(
      function () {
        say(button, "Copied");
      },
      function () {
        say(button, "Not copied: select it and copy");
      }
    );
  });
})();
