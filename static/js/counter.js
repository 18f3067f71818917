// Keeps each "n / limit" counter current while the user types. Inputs carry
// data-limit and data-counter (the counter's id); nothing cuts the text: the
// server refuses what is too long with a field error. Counted as the server
// counts: characters (code points), a line break as the two a form sends.
(function () {
  function length(text) {
    var breaks = text.match(/\n/g);
    return Array.from(text).length + (breaks ? breaks.length : 0);
  }
  function update(field) {
    var counter = document.getElementById(field.dataset.counter);
    if (!counter) return;
    var limit = Number(field.dataset.limit);
    var count = length(field.value);
    counter.textContent = count.toLocaleString("en") + " / " + limit.toLocaleString("en");
    counter.classList.toggle("over", count > limit);
  }
  document.addEventListener("input", function (event) {
    if (event.target.dataset && event.target.dataset.limit) update(event.target);
  });
  // What was typed before this script ran (it is deferred) counts too.
  document.querySelectorAll("[data-limit]").forEach(update);
})();
