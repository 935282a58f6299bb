postMessage('hi');
