// The benchmark report's script (inlined by report.html.j2): sorts the sortable tables on a
// header click, opens the trajectory section a link points at, expands or collapses them all,
// and marks the page ready (data-ready="1"). It reads no data and fetches nothing.
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-v');
    if (v === null) { v = cell.textContent; }
    if (v === '') { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function compare(a, b) {
    if (a === null || b === null) { return a === b ? 0 : (a === null ? 1 : -1); }
    if (typeof a !== typeof b) { return typeof a === 'number' ? -1 : 1; }
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var asc = th.getAttribute('data-dir') !== 'asc';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = key(r1.cells[col]), b = key(r2.cells[col]);
          if (a === null || b === null) { return compare(a, b); }
          return asc ? compare(a, b) : compare(b, a);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === 'DETAILS') { el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
  function setAll(open) {
    document.querySelectorAll('details.traj').forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById('expand-all');
  var collapse = document.getElementById('collapse-all');
  if (expand) { expand.addEventListener('click', function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener('click', function () { setAll(false); }); }
  document.body.dataset.ready = '1';
})();
