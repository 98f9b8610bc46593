// node under spill=1, for `make stress-spill-programs` (SPILL_PROGRAMS_MORE):
// the main thread keeps a heap of strings while three worker threads
// (worker_threads) each build and read objects of their own and post a
// sum back; V8's heap is the program's own anonymous mappings, charged
// and spilled as any.  What is printed depends on every string read.
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

function hash(s, h) {
	for (let i = 0; i < s.length; i++)
		h = (Math.imul(h, 31) + s.charCodeAt(i)) >>> 0;
	return h;
}

if (isMainThread) {
	const keep = [];
	for (let i = 0; i < 200000; i++)
		keep.push('k' + i + 'x'.repeat(40 + i % 60));
	const sums = [];
	let done = 0;
	for (let w = 0; w < 3; w++) {
		const worker = new Worker(__filename, { workerData: w });
		worker.on('message', (m) => {
			sums[w] = m;
			if (++done === 3) {
				let h = 0;
				for (const s of keep)
					h = hash(s, h);
				console.log('workers', sums.join(' '), 'main', keep.length, h);
			}
		});
	}
} else {
	const a = [];
	for (let i = 0; i < 150000; i++)
		a.push({ id: i, s: String.fromCharCode(97 + (i + workerData) % 26).repeat(30 + i % 50) });
	let h = 0;
	for (let r = 0; r < 2; r++)
		for (let i = 0; i < a.length; i += 1 + r)
			h = hash(a[(i * 7919) % a.length].s, h);
	parentPort.postMessage(h);
}
