import { serve } from './serve.js';

await serve();
