// A Run's page: its timeline, one floating bar per Session on a line of seconds since the Run
// started, drawn with Chart.js from the JSON the page carries (#timeline-data). Without
// JavaScript, or without the library, the table beside the canvas says the same.
(function () {
  "use strict";
  var data = document.getElementById("timeline-data");
  var figure = document.getElementById("timeline-figure");
  var canvas = document.getElementById("timeline");
  if (!data || !figure || !canvas || typeof Chart === "undefined") { return; }
  var bars = JSON.parse(data.textContent);
  var colours = { ended: "#2563eb", failed: "#b91c1c", running: "#d97706" };

  function took(seconds) {
    var whole = Math.max(0, Math.round(seconds));
    if (whole < 60) { return whole + "s"; }
    var rest = whole % 60;
    if (whole < 3600) { return Math.floor(whole / 60) + "m " + (rest < 10 ? "0" : "") + rest + "s"; }
    var minutes = Math.floor((whole % 3600) / 60);
    return Math.floor(whole / 3600) + "h " + (minutes < 10 ? "0" : "") + minutes + "m";
  }

  function described(bar) {
    var lines = [
      "Harness: " + bar.harness + (bar.model ? " (" + bar.model + ")" : ""),
      "started: " + took(bar.start) + " into the Run",
      "length: " + took(bar.end - bar.start) + (bar.running ? " so far" : ""),
      "state: " + bar.state
    ];
    if (bar.tokens !== null) { lines.push("tokens: " + bar.tokens); }
    lines.push("cost: " + (bar.cost_usd === null ? "not reported" : "$" + bar.cost_usd.toFixed(4)));
    return lines;
  }

  figure.classList.add("drawn");  // the chart is sized by its area, which must show first
  figure.querySelector(".chart-area").style.height = (bars.length * 2.2 + 4) + "rem";
  var colour = function (bar) { return colours[bar.running ? "running" : bar.state] || "#6b7280"; };
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: bars.map(function (bar) { return bar.label; }),
      datasets: [{
        label: "Sessions",
        data: bars.map(function (bar) { return [bar.start, Math.max(bar.end, bar.start + 0.5)]; }),
        backgroundColor: bars.map(colour),
        borderColor: bars.map(colour),
        borderWidth: 1,
        borderSkipped: false,
        barPercentage: 0.8
      }]
    },
    options: {
      indexAxis: "y",
      animation: false,
      maintainAspectRatio: false,
      scales: {
        x: {
          type: "linear",
          min: 0,
          title: { display: true, text: "seconds since the Run started" }
        }
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: function (items) { return bars[items[0].dataIndex].label; },
            label: function (item) { return described(bars[item.dataIndex]); }
          }
        }
      }
    }
  });
})();
