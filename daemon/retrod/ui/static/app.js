// retrod's web UI: the session timeline and the trends chart (uPlot), and the live page's updates
// (server-sent events).
// The page's figures are rendered by the server; this only draws the chart and swaps live rows.
(function () {
  "use strict";

  var VERDICT_COLOURS = {
    high_impact: "#2e9e5b", moderate_impact: "#7cc48f", small_impact: "#c3d98a",
    exploratory_useful: "#4f8fd6", exploratory_waste: "#f0a44b", avoidable_waste: "#d9534f",
    pending: "#9aa0a6"
  };

  // The tasks of Claude's plan: a lane of bars near the plot's top, neighbours in alternating
  // shades (two windows of one task share its shade); cache misses: a marker each, by cause.
  var TASK_COLOURS = ["#5b6bbf", "#2f8f8f"];
  var TASK_LANE = { top: 22, height: 14 };  // CSS px below the plot's top (under the phases' names)
  var MISS_COLOURS = { compaction: "#7b3fa0", model: "#1f77b4", expired: "#e6a100", invalidated: "#c0392b" };
  var MISS_TOP = 40, MISS_SIZE = 10, MISS_REACH = 6;  // the marker's top, height, and how near points at it

  function seconds(iso) { return iso ? Date.parse(iso) / 1000 : null; }

  function short(n) {
    if (n == null) return "";
    var units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(n) >= units[i][0]) return (n / units[i][0]).toFixed(1).replace(/\.0$/, "") + units[i][1];
    }
    return String(n);
  }

  // Times as the rest of the page shows them: UTC, 24-hour; the date where it changes; the
  // seconds when the ticks are less than a minute apart (a short session's ticks would otherwise
  // read 03:08 03:08 03:08).
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utcTicks(u, vals, axisIdx, space, incr) {
    var lastDay = null;
    return vals.map(function (v) {
      if (v == null) return null;
      var d = new Date(v * 1000);
      var day = d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
      var time = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + (incr < 60 ? ":" + pad(d.getUTCSeconds()) : "");
      var label = day !== lastDay ? time + "\n" + day : time;
      lastDay = day;
      return label;
    });
  }
  function utcValue(u, v) {
    if (v == null) return "—";
    var d = new Date(v * 1000);
    return d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }

  function withAlpha(hex, alpha) {
    var v = parseInt(hex.slice(1), 16);
    return "rgba(" + (v >> 16) + "," + ((v >> 8) & 255) + "," + (v & 255) + "," + alpha + ")";
  }

  // Where each phase is drawn, in CSS pixels from the plot's left: its window, or, when that is
  // narrower than MIN_BAND_PX (10 s of a 3-hour session is a pixel), that width centred on it, so
  // that a short phase can be seen and pointed at. Narrowest last: drawn on top of the others.
  var MIN_BAND_PX = 6;
  function phaseSpans(u, data, lastX) {
    return data.phases.map(function (p) {
      var x0 = u.valToPos(seconds(p.started_at), "x"), x1 = u.valToPos(seconds(p.ended_at) || lastX, "x");
      if (x1 - x0 < MIN_BAND_PX) {
        var middle = (x0 + x1) / 2;
        x0 = middle - MIN_BAND_PX / 2;
        x1 = middle + MIN_BAND_PX / 2;
      }
      return { phase: p, left: x0, width: x1 - x0 };
    }).sort(function (a, b) { return b.width - a.width; });
  }

  // Phases as bands behind the bars, coloured by verdict, named when there is room (pointing at
  // one names it in any case: phaseTip).
  function drawBands(u, data, lastX) {
    var ctx = u.ctx, box = u.bbox, px = devicePixelRatio;
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.left, box.top, box.width, box.height);
    ctx.clip();
    phaseSpans(u, data, lastX).forEach(function (span) {
      var x0 = box.left + span.left * px, width = span.width * px, p = span.phase;
      if (x0 + width <= box.left || x0 >= box.left + box.width) return;
      var colour = VERDICT_COLOURS[p.verdict] || "#9aa0a6";
      ctx.fillStyle = withAlpha(colour, span.width > 3 * MIN_BAND_PX ? 0.18 : 0.4);
      ctx.fillRect(x0, box.top, width, box.height);
      ctx.fillStyle = colour;
      ctx.fillRect(x0, box.top, width, 4 * px);
      if (span.width > 60) {
        ctx.fillStyle = "#333";
        ctx.font = 11 * px + "px system-ui, sans-serif";
        ctx.fillText(p.phase, Math.max(x0, box.left) + 4 * px, box.top + 16 * px, width - 8 * px);
      }
    });
    ctx.restore();
  }

  // Each window of each task, where it is drawn (as phaseSpans: a short one is MIN_BAND_PX wide).
  function taskSpans(u, data, lastX) {
    var spans = [];
    (data.tasks || []).forEach(function (task, i) {
      task.windows.forEach(function (w) {
        var x0 = u.valToPos(seconds(w.start), "x"), x1 = u.valToPos(seconds(w.end) || lastX, "x");
        if (x1 - x0 < MIN_BAND_PX) {
          var middle = (x0 + x1) / 2;
          x0 = middle - MIN_BAND_PX / 2;
          x1 = middle + MIN_BAND_PX / 2;
        }
        spans.push({ task: task, colour: TASK_COLOURS[i % TASK_COLOURS.length], left: x0, width: x1 - x0 });
      });
    });
    return spans;
  }

  function drawTasks(u, data, lastX) {
    var ctx = u.ctx, box = u.bbox, px = devicePixelRatio;
    var top = box.top + TASK_LANE.top * px, height = TASK_LANE.height * px;
    taskSpans(u, data, lastX).forEach(function (span) {
      // (whole pixels: neighbours' edges stay their own colour, not a blend of both)
      var x0 = Math.round(box.left + span.left * px), width = Math.max(Math.round(span.width * px), 1);
      if (x0 + width <= box.left || x0 >= box.left + box.width) return;
      ctx.fillStyle = span.colour;
      ctx.fillRect(x0, top, width, height);
      if (span.width > 50) {  // its number and name, when there is room
        ctx.fillStyle = "#fff";
        ctx.font = 10 * px + "px system-ui, sans-serif";
        ctx.fillText(span.task.number + ". " + span.task.name, Math.max(x0, box.left) + 3 * px,
                     top + height - 3 * px, width - 6 * px);
      }
    });
  }

  function drawMisses(u, data) {
    var ctx = u.ctx, box = u.bbox, px = devicePixelRatio, top = box.top + MISS_TOP * px, half = MISS_SIZE / 2 * px;
    (data.misses || []).forEach(function (m) {
      var x = u.valToPos(seconds(m.at), "x", true);
      ctx.fillStyle = MISS_COLOURS[m.cause] || "#555";
      ctx.strokeStyle = "#fff";
      ctx.lineWidth = px;
      ctx.beginPath();
      ctx.moveTo(x - half, top);
      ctx.lineTo(x + half, top);
      ctx.lineTo(x, top + MISS_SIZE * px);
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
    });
  }

  // What is under the pointer, named in a tip over the plot (a band may be too narrow for its
  // name): a cache miss's marker, else a task's bar (in their rows), else the phase.
  function pointedAt(u, data, lastX) {
    var left = u.cursor.left, top = u.cursor.top, found = null;
    if (left == null || left < 0) return null;
    if (top >= MISS_TOP - 2 && top <= MISS_TOP + MISS_SIZE + 2) {
      var nearest = MISS_REACH + 1;
      (data.misses || []).forEach(function (m) {
        var away = Math.abs(u.valToPos(seconds(m.at), "x") - left);
        if (away < nearest) { nearest = away; found = m; }
      });
      if (found) return found.tip;
    }
    if (top >= TASK_LANE.top && top <= TASK_LANE.top + TASK_LANE.height) {
      taskSpans(u, data, lastX).forEach(function (span) {
        if (left >= span.left && left <= span.left + span.width) found = span.task;
      });
      if (found) return found.tip;
    }
    phaseSpans(u, data, lastX).forEach(function (span) {  // the narrowest, drawn on top, wins
      if (left >= span.left && left <= span.left + span.width) found = span.phase;
    });
    return found && found.tip;
  }

  function phaseTip(u, data, lastX, tip) {
    var text = pointedAt(u, data, lastX);
    tip.hidden = !text;
    if (!text) return;
    tip.textContent = text;
    tip.style.left = Math.min(u.cursor.left + 10, Math.max(u.bbox.width / devicePixelRatio - tip.offsetWidth, 0)) + "px";
  }

  // Compactions as dashed lines with a diamond on top; subagents as spans along the bottom; the
  // tasks' lane and the cache misses' markers over them all.
  function drawMarks(u, data, lastX) {
    var ctx = u.ctx, box = u.bbox, px = devicePixelRatio;
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.left, box.top, box.width, box.height);
    ctx.clip();
    data.timeline.compactions.forEach(function (at) {
      var x = u.valToPos(seconds(at), "x", true);
      ctx.strokeStyle = "#7b3fa0";
      ctx.setLineDash([4 * px, 3 * px]);
      ctx.lineWidth = 1.5 * px;
      ctx.beginPath();
      ctx.moveTo(x, box.top);
      ctx.lineTo(x, box.top + box.height);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = "#7b3fa0";
      ctx.beginPath();
      ctx.moveTo(x, box.top + 6 * px);
      ctx.lineTo(x + 5 * px, box.top + 11 * px);
      ctx.lineTo(x, box.top + 16 * px);
      ctx.lineTo(x - 5 * px, box.top + 11 * px);
      ctx.fill();
    });
    data.subagents.forEach(function (a, i) {
      var start = seconds(a.started_at);
      if (start == null) return;
      var x0 = u.valToPos(start, "x", true), x1 = u.valToPos(start + Math.max(a.seconds, 60), "x", true);
      var y = box.top + box.height - (6 + (i % 4) * 6) * px;
      ctx.fillStyle = "#e07b39";
      ctx.fillRect(x0, y, Math.max(x1 - x0, 3 * px), 4 * px);
    });
    drawTasks(u, data, lastX);
    drawMisses(u, data);
    ctx.restore();
  }

  // The minutes' costs added up: the cost so far at each minute, and whether a minute before it
  // had requests without a price (the total is then a floor, as the summary's "≥").
  function runningCost(costs) {
    var total = 0, partial = false, floors = [];
    var totals = costs.map(function (c) {
      if (c == null) partial = true; else total += c;
      floors.push(partial);
      return total;
    });
    return { totals: totals, floors: floors };
  }

  // A y axis as wide as its widest label (a fixed width cut the "$" off larger figures).
  function axisSize(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) return axis._size;  // uPlot asks again after a resize: settle
    var widest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { if (v) widest = Math.max(widest, u.ctx.measureText(v).width); });
    return Math.ceil(axis.ticks.size + axis.gap + widest / devicePixelRatio) + 4;
  }

  function money(v) { return "$" + v.toFixed(2); }

  function timeline(el, data) {
    var t = data.timeline;
    if (!t.minute.length) {
      el.classList.add("empty");
      el.textContent = "No request with a timestamp: nothing to draw.";
      return;
    }
    // Bars sit in the middle of their minute; the x axis spans the first minute to the last.
    var xs = t.minute.map(function (m) { return m + 30; });
    var lastX = xs[xs.length - 1] + 30;
    var cost = runningCost(t.cost_usd);
    var opts = {
      width: Math.max(el.clientWidth, 320),
      height: 320,
      scales: { x: { time: true, range: [t.minute[0], lastX] }, tokens: {}, usd: {}, flagged: { range: [0, 1] } },
      series: [
        { label: "Minute", value: function (u, v) { return utcValue(u, v == null ? null : v - 30); } },
        { label: "Output tokens", scale: "tokens", stroke: "#3b6fc4", fill: "rgba(59,111,196,0.55)", width: 1,
          paths: uPlot.paths.bars({ size: [0.9, 12] }), points: { show: false },
          value: function (u, v) { return v == null ? "—" : v.toLocaleString(); } },
        // The cost so far, as a step: it rises in the minute money is spent and stays flat until
        // the next such minute (a straight line between two minutes hours apart read as spending
        // through the idle time between them).
        { label: "Est. cost so far", scale: "usd", stroke: "#c0392b", width: 1.5, points: { show: false },
          paths: uPlot.paths.stepped({ align: 1 }),
          value: function (u, v, si, idx) {
            if (idx == null) return "—";
            var minute = t.cost_usd[idx];
            return (cost.floors[idx] ? "≥ " : "") + "$" + v.toFixed(4) +
              " (this minute " + (minute == null ? "not priced" : "$" + minute.toFixed(4)) + ")";
          } },
        // Minutes with calls a waste signal flagged: dots along the top (their own scale, no axis).
        { label: "Flagged calls", scale: "flagged", stroke: "#d9534f", fill: "#d9534f", width: 0,
          paths: function () { return null; }, points: { show: true, size: 7, fill: "#d9534f", stroke: "#fff" },
          value: function (u, v, si, idx) { return idx == null ? "—" : String(t.flagged[idx]); } }
      ],
      axes: [
        { values: utcTicks, size: 44, space: 60 },
        { scale: "tokens", values: function (u, vals) { return vals.map(short); }, size: axisSize },
        { scale: "usd", side: 1, grid: { show: false }, size: axisSize,
          values: function (u, vals) { return vals.map(money); } }
      ],
      hooks: {
        drawClear: [function (u) { drawBands(u, data, lastX); }],
        draw: [function (u) { drawMarks(u, data, lastX); }],
        setCursor: [function (u) { phaseTip(u, data, lastX, tip); }]
      }
    };
    // a flagged minute's dot sits near the top; its value (the count) shows in the legend
    var flaggedAt = t.flagged.map(function (n) { return n > 0 ? 0.93 : null; });
    var tip = document.createElement("div");
    tip.className = "phase-tip";
    tip.hidden = true;
    var chart = new uPlot(opts, [xs, t.output, cost.totals, flaggedAt], el);
    chart.over.appendChild(tip);
    el.chart = chart;  // for the browser tests (and the console)
    window.addEventListener("resize", function () {
      chart.setSize({ width: Math.max(el.clientWidth, 320), height: 320 });
    });
  }

  // Trends: each period's estimated cost (bars) and efficiency (line), at the period's start.
  function trendsChart(el, by, periods) {
    if (!periods.some(function (p) { return p.sessions > 0; })) {
      el.classList.add("empty");
      el.textContent = "No session with a date: nothing to draw.";
      return;
    }
    // x: the period's place in the list, named as the table names it (a period starts at midnight
    // in the trends' time zone, not the browser's)
    var xs = periods.map(function (p, i) { return i; });
    function name(i) { var p = periods[i]; return p ? p.period.slice(0, by === "month" ? 7 : 10) : ""; }
    var opts = {
      width: Math.max(el.clientWidth, 320),
      height: 260,
      scales: { x: { time: false, range: [-0.5, periods.length - 0.5] }, usd: {}, share: { range: [0, 1] } },
      series: [
        { label: "Period", value: function (u, v) { return v == null ? "—" : name(v); } },
        { label: "Est. cost", scale: "usd", stroke: "#3b6fc4", fill: "rgba(59,111,196,0.55)", width: 1,
          paths: uPlot.paths.bars({ size: [0.7, 60] }), points: { show: false },
          value: function (u, v) { return v == null ? "—" : "$" + v.toFixed(2); } },
        { label: "Efficiency", scale: "share", stroke: "#2e9e5b", width: 2, spanGaps: true,
          value: function (u, v) { return v == null ? "—" : Math.round(v * 100) + "%"; } }
      ],
      axes: [
        { space: 80, size: 40, incrs: [1, 2, 3, 4, 6, 12, 26, 52, 104, 365],
          values: function (u, vals) { return vals.map(name); } },
        { scale: "usd", size: axisSize, values: function (u, vals) { return vals.map(money); } },
        { scale: "share", side: 1, grid: { show: false }, size: axisSize,
          values: function (u, vals) { return vals.map(function (v) { return Math.round(v * 100) + "%"; }); } }
      ]
    };
    var chart = new uPlot(opts, [xs, periods.map(function (p) { return p.sessions ? p.cost_usd : null; }),
                                 periods.map(function (p) { return p.efficiency; })], el);
    el.chart = chart;
    window.addEventListener("resize", function () {
      chart.setSize({ width: Math.max(el.clientWidth, 320), height: 260 });
    });
  }

  function live(table) {
    var body = table.tBodies[0];
    var status = document.getElementById("live-status");
    var empty = document.getElementById("live-empty");
    var source = new EventSource("/api/events");
    source.addEventListener("open", function () { status.textContent = "following"; status.className = "status on"; });
    source.addEventListener("error", function () { status.textContent = "reconnecting…"; status.className = "status"; });
    source.addEventListener("figures", function (event) {
      var update = JSON.parse(event.data);
      Object.keys(update.rows_html).forEach(function (uuid) {
        var holder = document.createElement("tbody");
        holder.innerHTML = update.rows_html[uuid];  // rendered and escaped by the server
        var row = holder.firstElementChild;
        var old = body.querySelector('tr[data-uuid="' + CSS.escape(uuid) + '"]');
        if (old) { body.replaceChild(row, old); } else { body.insertBefore(row, body.firstChild); }
        row.classList.add("flash");
      });
      empty.hidden = body.rows.length > 0;
      status.textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
      status.className = "status on";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var chart = document.getElementById("timeline");
    if (chart) timeline(chart, JSON.parse(document.getElementById("retrod-data").textContent));
    var trends = document.getElementById("trends-chart");
    if (trends) {
      var figures = JSON.parse(document.getElementById("retrod-data").textContent);
      trendsChart(trends, figures.by, figures.trends);
    }
    var table = document.getElementById("live");
    if (table) live(table);
  });
})();
