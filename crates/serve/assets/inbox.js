// The decision inbox's one script. Every page works without it; with it, times are
// shown in the viewer's time zone, and a page listens to its event stream (the `data-live` attribute of <main>) and, when events
// arrive, fetches itself again and swaps each `data-region` for the fresh one. A
// region holding the focus or text the person is typing is left alone.
(function () {
  "use strict";
  // Instants are written in UTC; shown in the viewer's own time zone, the UTC instant
  // kept in the hover title.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (element) {
      var at = new Date(element.getAttribute("datetime"));
      if (!isNaN(at.getTime()) && !element.hasAttribute("data-local")) {
        element.textContent = at.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
        element.setAttribute("data-local", "true");
      }
    });
  }
  localTimes(document);
  // A decision whose transition needs a comment makes the comment box required as its
  // button is pressed, so the browser asks for the comment before anything is sent
  // (the server refuses such a decision without one either way).
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("form.decide button[name=to]") : null;
    var comment = button && button.form ? button.form.querySelector("textarea[name=comment]") : null;
    if (comment) {
      comment.required = button.getAttribute("data-needs-comment") === "true";
    }
  });
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var refreshes = 0;
  var timer = null;

  function busy(region) {
    if (region.contains(document.activeElement) && document.activeElement !== document.body) {
      return true;
    }
    var fields = region.querySelectorAll("textarea, input:not([type=hidden]), select");
    for (var i = 0; i < fields.length; i++) {
      var field = fields[i];
      if (field.value !== field.defaultValue && field.tagName !== "SELECT") {
        return true;
      }
    }
    return false;
  }

  function refresh() {
    timer = null;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (text === null) {
          return;
        }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-region]").forEach(function (region) {
          var next = fresh.querySelector('[data-region="' + region.getAttribute("data-region") + '"]');
          if (next && !busy(region)) {
            region.replaceWith(document.importNode(next, true));
          }
        });
        // Regions the page did not have yet (a decision appeared) go where the fresh
        // page has them: after their previous sibling region.
        fresh.querySelectorAll("[data-region]").forEach(function (next) {
          var name = next.getAttribute("data-region");
          if (document.querySelector('[data-region="' + name + '"]')) {
            return;
          }
          var before = next.previousElementSibling;
          var anchor = before && before.hasAttribute("data-region")
            ? document.querySelector('[data-region="' + before.getAttribute("data-region") + '"]')
            : null;
          var node = document.importNode(next, true);
          if (anchor) {
            anchor.after(node);
          } else {
            main.appendChild(node);
          }
        });
        document.querySelectorAll("[data-region]").forEach(function (region) {
          var name = region.getAttribute("data-region");
          if (!fresh.querySelector('[data-region="' + name + '"]') && !busy(region)) {
            region.remove();
          }
        });
        localTimes(document);
        refreshes += 1;
        main.setAttribute("data-refreshed", String(refreshes));
      })
      .catch(function () {});
  }

  // At most one refresh per 400 ms, however many events arrive.
  function soon() {
    if (timer === null) {
      timer = window.setTimeout(refresh, 400);
    }
  }

  var source = new EventSource(main.getAttribute("data-live"));
  source.addEventListener("archmax", soon);
  source.addEventListener("changed", soon);
  source.addEventListener("open", function () {
    main.setAttribute("data-listening", "true");
  });
})();
