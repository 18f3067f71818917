// Exact values of billing's charts on hover and on keyboard focus. Without
// JavaScript each bar, point and run keeps its <title> and the table below
// the chart says the same; this only makes them reachable without a mouse.
(function () {
  var tip = document.createElement("div");
  tip.className = "chart-tip";
  tip.setAttribute("role", "status");
  tip.hidden = true;
  document.body.appendChild(tip);

  function show(target) {
    var box = target.getBoundingClientRect();
    tip.textContent = target.getAttribute("data-tip");
    tip.hidden = false;
    var left = Math.min(Math.max(box.left + box.width / 2 - tip.offsetWidth / 2, 4),
      document.documentElement.clientWidth - tip.offsetWidth - 4);
    tip.style.left = (left + window.scrollX) + "px";
    tip.style.top = (box.top + window.scrollY - tip.offsetHeight - 6) + "px";
  }

  function hide() { tip.hidden = true; }

  document.querySelectorAll("figure.chart > svg, svg.heat-strip, svg.spark").forEach(function (svg) {
    var targets = Array.prototype.slice.call(svg.querySelectorAll("[data-tip]"));
    if (!targets.length) return;
    var current = -1;
    svg.setAttribute("tabindex", "0");
    svg.setAttribute("aria-describedby", "chart-keys");
    function select(index) {
      if (current >= 0) targets[current].classList.remove("tip-on");
      current = (index + targets.length) % targets.length;
      targets[current].classList.add("tip-on");
      show(targets[current]);
    }
    svg.addEventListener("focus", function () { select(current < 0 ? 0 : current); });
    svg.addEventListener("blur", function () {
      if (current >= 0) targets[current].classList.remove("tip-on");
      hide();
    });
    svg.addEventListener("keydown", function (event) {
      var moves = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
      if (event.key in moves) select(current + moves[event.key]);
      else if (event.key === "Home") select(0);
      else if (event.key === "End") select(targets.length - 1);
      else return;
      event.preventDefault();
    });
    targets.forEach(function (target, index) {
      // The tip says what the title did: one tooltip, not two.
      var title = target.querySelector("title");
      if (title) title.remove();
      target.addEventListener("mouseenter", function () { select(index); });
      target.addEventListener("mouseleave", hide);
    });
  });
  var keys = document.createElement("p");
  keys.id = "chart-keys";
  keys.className = "visually-hidden";
  keys.textContent = "Arrow keys step through the values.";
  document.body.appendChild(keys);
})();
