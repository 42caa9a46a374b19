// partner-memory inspector: progressive enhancement only; every page reads without it.
// Times arrive in UTC; show them in the browser's own time zone.
(function () {
  "use strict";
  var format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    timeZoneName: "short"
  });
  function localise(root) {
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var moment = new Date(times[i].getAttribute("datetime"));
      if (!isNaN(moment.getTime())) {
        times[i].title = times[i].textContent;
        times[i].textContent = format.format(moment);
      }
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    localise(document);
    document.documentElement.dataset.ready = "1";
  });
})();
