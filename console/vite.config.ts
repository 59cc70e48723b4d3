import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The console is built into console/dist and served by the service itself (src/modules/console).
// `npx vite console` runs a development server that passes API calls to a service on port 3000.
export default defineConfig({
  base: '/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: {
    proxy: {
      '/api': 'http://127.0.0.1:3000',
      '/sign-in/': 'http://127.0.0.1:3000',
    },
  },
});
