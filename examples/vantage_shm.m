function [img, info] = vantage_shm(RData, Trans, Receive, Resource, name, timeout_ms)
% VANTAGE_SHM  Push each Vantage RcvData frame to an out-of-process usbeam server through the
% usbeam_mex client (examples/usbeam_mex.c; no Python inside MATLAB).  Three uses:
%
%   vantage_shm('start', Trans, Receive, Resource)   % once, after the SetUp script
%   vantage_shm(RData)                               % the External process function, per frame
%   vantage_shm('stop')
%
% 'start' takes an optional region name (default '/usbeam') and open timeout in ms (5000).
% Per frame it pushes RData (int16 rows x channels, as VSX hands it) and waits for its image;
% with output arguments it returns the image (MATLAB size nx x nz for usbeam's (1, nz, nx):
% img.' is nz x nx) and the result info (frame_id, latency_s, ...) instead of drawing it.
%
% Before: build the MEX file (MATLAB: `mex -Icsrc examples/usbeam_mex.c csrc/shm/client.c -lrt`;
% Octave: `make mex`, or mkoctfile --mex with the same arguments) and put it on the path; save
% the workspace after the SetUp script (save MySetup.mat Trans TX TW Receive Resource Event
% PData) and start the beamformer it describes in a shell:
%   OMP_WAIT_POLICY=passive python -m usbeam serve --vantage MySetup.mat --name /usbeam
% In the SetUp script:
%   EF(1).Function = vsv.seq.function.ExFunctionDef('vantage_shm', @vantage_shm);
%   Process(1).classname = 'External'; Process(1).method = 'vantage_shm';
%   Process(1).Parameters = {'srcbuffer','receive', 'srcbufnum',1, 'srcframenum',-1, ...
%                            'dstbuffer','none'};
% Tested in GNU Octave by tests/live/test_vantage_octave.py (docs/live.md, "Vantage in 5
% steps"), which calls this function once per frame as VSX does; not run on hardware here.

persistent h hImage
if ischar(RData)
    switch RData
        case 'start'
            if nargin < 5 || isempty(name), name = '/usbeam'; end
            if nargin < 6 || isempty(timeout_ms), timeout_ms = 5000; end
            % checked first: a workspace usbeam cannot serve leaves a running session as it was
            [params, frame_size] = usbeam_params(Trans, Receive, Resource);
            if ~isempty(h)
                usbeam_mex('close', h);
                h = [];
            end
            h = usbeam_mex('open', name, timeout_ms);
            % the server checks frame and channel map against the workspace it serves
            usbeam_mex('set_params', h, jsonencode(params), frame_size);
            hImage = [];
        case 'stop'
            if ~isempty(h)
                usbeam_mex('close', h);
            end
            h = [];
        otherwise
            error('usbeam:argument', 'vantage_shm: unknown command ''%s'' (start, stop, or an RData frame)', RData);
    end
    img = [];
    info = [];
    return
end

if isempty(h)
    error('usbeam:notStarted', 'vantage_shm: call vantage_shm(''start'', Trans, Receive, Resource) first');
end
% RData (int16 rows x channels, column-major) goes from its own memory into the server's slot.
id = usbeam_mex('push', h, RData, 1000);
[img, info] = usbeam_mex('result', h, id, 2000);
if nargout == 0
    img_zx = img.';                            % nz x nx
    if isempty(hImage) || ~ishandle(hImage)
        figure; hImage = imagesc(img_zx); colormap gray; axis image;
    else
        set(hImage, 'CData', img_zx);
    end
    drawnow;
end
end

function [params, frame_size] = usbeam_params(Trans, Receive, Resource)
% The frame layout and channel map of RcvBuffer 1, frame 1, in acqNum order (as
% usbeam.io.load_vantage reads them), refusing what usbeam does not serve.
if isfield(Trans, 'HVMux') && ~isempty(Trans.HVMux)
    error('usbeam:hvmux', ['vantage_shm: Trans.HVMux: probes with a high-voltage multiplexer (switched ' ...
                           'apertures) are not supported: their element -> channel wiring depends on Receive.aperture']);
end
rx = Receive([Receive.bufnum] == 1 & [Receive.framenum] == 1);
if isempty(rx)
    error('usbeam:receive', 'vantage_shm: no Receive of frame 1 writes to RcvBuffer 1');
end
[~, order] = sort([rx.acqNum]);
rx = rx(order);
supported = {'NS200BW', 'BS100BW', 'BS67BW', 'BS50BW', 'custom'};
for k = 1:numel(rx)
    if isfield(rx(k), 'aperture') && ~isempty(rx(k).aperture) && rx(k).aperture ~= 1
        error('usbeam:hvmux', 'vantage_shm: Receive.aperture = %g: switched (HVMux) apertures are not supported', ...
              rx(k).aperture);
    end
    mode = 'NS200BW';
    if isfield(rx(k), 'sampleMode') && ~isempty(rx(k).sampleMode), mode = rx(k).sampleMode; end
    if ~any(strcmp(mode, supported))
        error('usbeam:sampleMode', ['vantage_shm: Receive.sampleMode = ''%s'' is not supported by usbeam ' ...
                                    '(NS200BW, BS100BW, BS67BW, BS50BW, custom with decimSampleRate)'], mode);
    end
end
if isfield(Trans, 'Connector') && ~isempty(Trans.Connector)
    wiring = Trans.Connector;
else
    wiring = Trans.ConnectorES;     % the name in newer Vantage software
end
frame_size = double([Resource.RcvBuffer(1).rowsPerFrame, Resource.RcvBuffer(1).colsPerFrame]);
params.frame = struct('shape', frame_size, 'dtype', 'int16', 'order', 'F');
% Index lists go as cell arrays: jsonencode writes a cell as a JSON array even with one
% element, where a 1x1 numeric array would become a bare number.  Fields are assigned one by
% one: struct('name', c) with a cell c would make a struct array.
cmap.element_channel = num2cell(double(wiring(:)') - 1);
cmap.acquisition_row = num2cell(double([rx.startSample]) - 1);
cmap.n_samples = double(rx(1).endSample - rx(1).startSample + 1);
params.channel_map = cmap;
params.c = Resource.Parameters.speedOfSound;
params.fc = Trans.frequency * 1e6;
end
