% vantage_shm.m - push each Vantage RcvData frame to an out-of-process usbeam server
% through the C client library (loadlibrary/calllib; no Python inside MATLAB).
%
% 1. In a shell, start the beamforming process:
%        python -m usbeam serve --name /usbeam --slot-bytes 67108864 --pipeline mypipe.py:make
%    (`make client` builds build/libusbeam_client.so; its header is csrc/usbeam_client.h.)
% 2. In MATLAB, once after the SetUp script:  usbeam_shm_start(Trans, Receive, Resource)
% 3. Process(1).method = 'usbeamShmPush' as an External process after each frame.
% (Not run against hardware here: tests/test_live_shm.py drives the same library entry
% points with Vantage-laid-out frames.)

function usbeam_shm_start(Trans, Receive, Resource)
    global usbeamClient
    if ~libisloaded('libusbeam_client')
        loadlibrary('libusbeam_client.so', 'usbeam_client.h');
    end
    usbeamClient = calllib('libusbeam_client', 'usbeam_client_open', '/usbeam', int32(5000));
    if isNull(usbeamClient)
        error('usbeam: %s', calllib('libusbeam_client', 'usbeam_client_last_error'));
    end
    rx = Receive([Receive.framenum] == 1);
    params.frame = struct('shape', [Resource.RcvBuffer(1).rowsPerFrame, Resource.RcvBuffer(1).colsPerFrame], ...
                          'dtype', 'int16', 'order', 'F');
    params.channel_map = struct('element_channel', Trans.Connector(:)' - 1, ...
                                'acquisition_row', [rx.startSample] - 1, ...
                                'n_samples', rx(1).endSample - rx(1).startSample + 1);
    params.c = Resource.Parameters.speedOfSound;
    params.fc = Trans.frequency * 1e6;
    check(calllib('libusbeam_client', 'usbeam_client_set_params', usbeamClient, jsonencode(params)));
end

function usbeamShmPush(RData)
    global usbeamClient
    frameId = libpointer('uint64Ptr', 0);
    % RData is int16 rows x channels, column-major: its bytes go as they are.
    check(calllib('libusbeam_client', 'usbeam_client_push', usbeamClient, RData, ...
                  uint64(numel(RData) * 2), int32(100), frameId));
    % Read the image of this frame (or call usbeam_client_latest for the newest one).
    info = libstruct('usbeam_client_result');
    img = zeros(1, 1 << 20, 'uint8');
    pImg = libpointer('uint8Ptr', img);
    status = calllib('libusbeam_client', 'usbeam_client_get_result', usbeamClient, frameId.Value, ...
                     pImg, uint64(numel(img)), int32(100), info);
    if status == 0
        shape = double(info.shape(1:info.ndim));
        image = reshape(pImg.Value(1:prod(shape)), fliplr(shape));   % C order -> MATLAB
        imagesc(image); colormap gray; drawnow limitrate;
    end
end

function check(status)
    if status ~= 0
        error('usbeam: %s', calllib('libusbeam_client', 'usbeam_client_last_error'));
    end
end
