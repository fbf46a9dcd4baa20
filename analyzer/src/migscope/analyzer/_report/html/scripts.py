"""The page's inline style and its one small script.

Why so little script: the report must read without it (a mail client, a print), so every
table is already in the order that matters and every chart is an image or SVG. The script
only adds what a reader of a large fleet needs: sort a table by a click on a column, group
its rows by a column with the group's total, find rows by text, open a node's slices from
the pool heatmap, and show the time and value of the heatmap cell under the pointer (read
back from the pixel's colour, so the page carries no second copy of the data). The
Content-Security-Policy allows inline script and style, and nothing from anywhere else.

:data:`ERROR_HOOK` runs first, in the head: it records any script error into the hidden
``#js-errors`` element, so that automated checks can prove the page runs cleanly.
"""

from __future__ import annotations

from migscope.analyzer._report.html.png import ACTIVITY_SCALE, MEMORY_SCALE

ERROR_HOOK = (
    "window.addEventListener('error',function(e){var n=document.getElementById('js-errors');"
    "if(n){n.textContent+=String(e.message)+'\\n';}});"
)

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;
max-width:1280px}
h1{margin-bottom:4px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{margin:18px 0 6px}a{color:#1a5fb4}small{color:#666}
.muted{color:#666}.warn{background:#fff4e5;border-left:4px solid #ff9f1c;padding:6px 10px}
nav a{margin-right:12px}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:150px;max-width:330px}
.card b{display:block;font-size:1.5em}.card small{display:block}
#card-wasted-gpu-hours,#card-wasted-cost,#card-gpus-freed{border-color:#999}
.delta{display:block;font-weight:600}.delta.up{color:#b00}.delta.down{color:#080}
.row{display:flex;flex-wrap:wrap;gap:24px}.row>div{flex:1 1 380px}
#next-step{border:1px solid #5b8def;border-radius:6px;padding:0 14px;background:#f5f8ff}
pre{background:#f5f5f5;padding:8px;overflow-x:auto}
table{border-collapse:collapse;font-size:0.85em;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}
.scroll{max-height:75vh;overflow:auto;margin:8px 0}.scroll table{margin:0}
table.sortable td:nth-child(-n+6){white-space:nowrap}
table.sortable td:last-child{min-width:240px}
th[aria-sort=ascending]::after{content:' ▲'}th[aria-sort=descending]::after{content:' ▼'}
tr.grp td{background:#eef2f7;font-weight:600;cursor:pointer}
tr.f-out,tr.g-out{display:none}.tools{margin:6px 0}.tools label{margin-right:16px}
.badge{display:inline-block;padding:1px 6px;border-radius:4px;color:#fff}
.bar{display:inline-block;height:12px;vertical-align:middle}
.gpu{display:inline-block;margin:6px 18px 6px 0}svg text{font-family:inherit;font-size:11px}
.memslices{fill:#fafafa;stroke:#ccc}path.memslices{fill:none}text.ms{font-size:10px}
rect.instance{stroke:#333;fill-opacity:.85;rx:4px}
text.il{text-anchor:middle;fill:#fff;pointer-events:none}text.il.s{font-size:9px}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
.hm{display:grid;grid-template-columns:330px max-content 22px;column-gap:6px;margin:4px 0 10px}
.hl div{height:14px;line-height:14px;font-size:11px;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;padding-left:4px;border-left:4px solid transparent}
.mh{font-size:10px;align-self:end}
img.heat{image-rendering:pixelated;display:block;cursor:crosshair}
details.node{margin:2px 0 2px 12px}details.node>summary{cursor:pointer;font-size:0.9em}
#tip{position:fixed;z-index:9;background:#222;color:#fff;font-size:12px;padding:3px 6px;
border-radius:3px;pointer-events:none;white-space:nowrap}
.st-idle{border-left-color:#d62728!important}.st-unallocated{border-left-color:#9e9e9e!important}
.st-oversized{border-left-color:#ff9f1c!important}.st-saturated{border-left-color:#8e44ad!important}
.st-healthy{border-left-color:#2ca02c!important}.st-unknown{border-left-color:#607d8b!important}
"""

_ACT_LO, _ACT_HI = ACTIVITY_SCALE.low, ACTIVITY_SCALE.high
_MEM_LO, _MEM_HI = MEMORY_SCALE.low, MEMORY_SCALE.high

_TEMPLATE = """(function(){
var A=Array.prototype,D=['Sun','Mon','Tue','Wed','Thu','Fri','Sat'];
function each(s,f){A.forEach.call(document.querySelectorAll(s),f);}
function key(td,num){var v=td.hasAttribute('data-v')?td.getAttribute('data-v'):td.textContent;
if(!num)return v.toLowerCase();var f=parseFloat(String(v).replace(/,/g,''));
return isNaN(f)?-Infinity:f;}
function rows(t){return A.filter.call(t.tBodies[0].rows,function(r){
return !r.classList.contains('grp');});}
function regroup(t){var body=t.tBodies[0];
each('#'+t.id+' tr.grp',function(r){r.remove();});
var sel=document.querySelector('select.group-by[data-table="'+t.id+'"]');
var col=sel&&sel.value!==''?+sel.value:-1,rs=rows(t);
rs.forEach(function(r){r.classList.remove('g-out');});
if(col<0){rs.forEach(function(r){body.appendChild(r);});return;}
var ths=t.tHead.rows[0].cells,sum=A.findIndex.call(ths,function(h){
return h.hasAttribute('data-sum');}),groups={},order=[];
rs.forEach(function(r){var k=r.cells[col].textContent;
if(!groups[k]){groups[k]={rows:[],sum:0};order.push(k);}
groups[k].rows.push(r);if(sum>=0){var v=key(r.cells[sum],true);
if(v>0)groups[k].sum+=v;}});
order.sort(function(a,b){return groups[b].sum-groups[a].sum||(a<b?-1:a>b?1:0);});
order.forEach(function(k){var g=groups[k],h=document.createElement('tr'),
c=document.createElement('td');h.className='grp';c.colSpan=ths.length;
c.textContent=ths[col].textContent+': '+k+' · '+g.rows.length+' row(s)'+
(sum>=0?' · '+g.sum.toFixed(1)+' '+ths[sum].textContent:'');
h.appendChild(c);h.addEventListener('click',function(){g.rows.forEach(function(r){
r.classList.toggle('g-out');});});body.appendChild(h);
g.rows.forEach(function(r){body.appendChild(r);});});}
function sortBy(t,i,dir){var num=t.tHead.rows[0].cells[i].getAttribute('data-type')==='num';
var rs=rows(t).map(function(r,n){return [key(r.cells[i],num),n,r];});
rs.sort(function(a,b){return (a[0]<b[0]?-1:a[0]>b[0]?1:0)*dir||a[1]-b[1];});
var body=t.tBodies[0];rs.forEach(function(x){body.appendChild(x[2]);});regroup(t);}
each('table.sortable',function(t){A.forEach.call(t.tHead.rows[0].cells,function(th,i){
th.addEventListener('click',function(){var num=th.getAttribute('data-type')==='num',
now=th.getAttribute('aria-sort'),dir=now?(now==='ascending'?-1:1):(num?-1:1);
A.forEach.call(t.tHead.rows[0].cells,function(o){o.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',dir>0?'ascending':'descending');sortBy(t,i,dir);});});});
each('select.group-by',function(s){s.addEventListener('change',function(){
regroup(document.getElementById(s.getAttribute('data-table')));});});
each('input.filter',function(f){f.addEventListener('input',function(){
var q=f.value.toLowerCase(),t=document.getElementById(f.getAttribute('data-table'));
rows(t).forEach(function(r){r.classList.toggle('f-out',
q!==''&&r.textContent.toLowerCase().indexOf(q)<0);});});});
function open(id){var d=document.getElementById(id);if(d){d.open=true;d.scrollIntoView();}}
document.addEventListener('click',function(e){var a=e.target.closest&&e.target.closest('a.drill');
if(a){open(a.getAttribute('href').slice(1));}});
var tip=document.createElement('div');tip.id='tip';tip.hidden=true;document.body.appendChild(tip);
function at(img,e){var hm=img.parentNode,mem=img.classList.contains('mem'),
cols=mem?1:+hm.getAttribute('data-cols'),n=+hm.getAttribute('data-rows');
return {hm:hm,mem:mem,c:Math.min(cols-1,Math.floor(e.offsetX/img.clientWidth*cols)),
r:Math.min(n-1,Math.floor(e.offsetY/img.clientHeight*n))};}
function value(img,p){if(!img._x){var cv=document.createElement('canvas');
cv.width=img.naturalWidth;cv.height=img.naturalHeight;img._x=cv.getContext('2d');
img._x.drawImage(img,0,0);}var d=img._x.getImageData(p.c,p.r,1,1).data;
if(d[0]===d[1]&&d[1]===d[2])return d[0]===255?'':'no data';
var t=Math.max(0,Math.min(1,p.mem?(MEM_LO_G-d[1])/MEM_RANGE_G:(ACT_LO_R-d[0])/ACT_RANGE_R));
return Math.round(Math.pow(t,p.mem?MEM_INV_GAMMA:ACT_INV_GAMMA)*100)+'%';}
function when(hm,c){var per=hm.getAttribute('data-period');
if(!per)return ['p50','p95','max'][c];
var d=new Date((+hm.getAttribute('data-start')+c*per)*1000);
return D[d.getUTCDay()]+' '+d.toISOString().slice(0,16).replace('T',' ')+' UTC';}
each('img.heat',function(img){img.addEventListener('mousemove',function(e){
var p=at(img,e),label=p.hm.querySelector('.hl').children[p.r],v=value(img,p);
tip.textContent=(label?label.textContent+' · ':'')+(p.mem?'p95 memory held '+v:
when(p.hm,p.c)+': activity '+v);tip.style.left=(e.clientX+14)+'px';
tip.style.top=(e.clientY+14)+'px';tip.hidden=false;});
img.addEventListener('mouseleave',function(){tip.hidden=true;});
img.addEventListener('click',function(e){var p=at(img,e),
a=p.hm.querySelector('.hl').children[p.r];a=a&&a.querySelector('a.drill');
if(a){open(a.getAttribute('href').slice(1));}});});
})();"""
# The colour scales of .png, so that a pixel's colour reads back as its value.
SCRIPT = (
    _TEMPLATE.replace("ACT_LO_R", str(_ACT_LO[0]))
    .replace("ACT_RANGE_R", str(_ACT_LO[0] - _ACT_HI[0]))
    .replace("MEM_LO_G", str(_MEM_LO[1]))
    .replace("MEM_RANGE_G", str(_MEM_LO[1] - _MEM_HI[1]))
    .replace("ACT_INV_GAMMA", repr(1 / ACTIVITY_SCALE.gamma))
    .replace("MEM_INV_GAMMA", repr(1 / MEMORY_SCALE.gamma))
)
"""The page's script, run at the end of the body."""
